package group_test

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Join is a "group.join <path>" span under its caller, with the
// MEMBER_JOINED event naming our node; its requests (the create that
// finds the group's path missing, the path's create, our node's) are
// CLIENT spans under it, each naming its node, the expected no_node not a
// failure. A refused Join's span fails with error.type member_exists.
// SetData and Leave are spans of their own with their set and delete.
// Watch's reads go to the same provider. Durations are measured.
func TestOtel(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	ctx := ctxT(t)
	rec := oteltest.New(t)
	const path = "/otel/g"
	opts := []group.Option{group.WithTracerProvider(rec.TP), group.WithMeterProvider(rec.MP)}
	g := must[*group.Group](t)(group.Watch(sim.Connect(), path, opts...))
	closeOnCleanup(t, g)
	cctx, parent := rec.TP.Tracer("test").Start(ctx, "request")
	m := must[*group.Member](t)(group.Join(cctx, sim.Connect(), path, "x", []byte("d"), opts...))
	if err := m.SetData(cctx, []byte("e")); err != nil {
		t.Fatal(err)
	}
	if _, err := group.Join(cctx, sim.Connect(), path, "x", nil, opts...); !errors.Is(err, group.ErrMemberExists) {
		t.Fatalf("second Join: %v", err)
	}
	if err := m.Leave(cctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Initialized(cctx); err != nil {
		t.Fatal(err)
	}
	parent.End()
	rec.CheckConventions(t)

	joins := rec.Named("group.join " + path)
	if len(joins) != 2 {
		t.Fatalf("%d join spans:%s", len(joins), rec.Names())
	}
	ok, refused := joins[0], joins[1]
	if ok.Status().Code == codes.Error {
		ok, refused = refused, ok
	}
	for _, s := range joins {
		if s.SpanKind() != trace.SpanKindInternal || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("join span: kind %v, not the caller's child", s.SpanKind())
		}
	}
	if !oteltest.HasEvent(ok, "MEMBER_JOINED") || ok.Status().Code == codes.Error {
		t.Errorf("join span: status %v, MEMBER_JOINED event %t", ok.Status(), oteltest.HasEvent(ok, "MEMBER_JOINED"))
	}
	if refused.Status().Code != codes.Error || oteltest.Attr(refused, "error.type") != "member_exists" {
		t.Errorf("refused join span: status %v, error.type %q", refused.Status(), oteltest.Attr(refused, "error.type"))
	}
	nodes := map[string]bool{}
	for _, k := range rec.Children(ok) {
		nodes[oteltest.Attr(k, "zookeeper.node")] = true
		if k.SpanKind() != trace.SpanKindClient || k.Status().Code == codes.Error {
			t.Errorf("%s: kind %v, status %v", k.Name(), k.SpanKind(), k.Status())
		}
		oteltest.WantAttrs(t, k, attribute.String("zkrecipes.recipe", "group"))
	}
	for _, n := range []string{path, path + "/x"} {
		if !nodes[n] {
			t.Errorf("no request of the join names %s: %v", n, nodes)
		}
	}
	for span, req := range map[string]string{"group.set " + path: "set " + path, "group.leave " + path: "delete " + path} {
		s := rec.Only(t, span)
		var names []string
		for _, k := range rec.Children(s) {
			names = append(names, k.Name())
		}
		if len(names) != 1 || names[0] != req {
			t.Errorf("%s: requests %q, want %s", span, names, req)
		}
	}
	if len(rec.Named("children "+path)) == 0 {
		t.Errorf("Watch's reads are not on the provider:%s", rec.Names())
	}
	ops := rec.Metric(t, group.ScopeName, "db.client.operation.duration")
	metricdatatest.AssertHasAttributes(t, ops, attribute.String("db.system.name", "zookeeper"), attribute.String("zkrecipes.recipe", "group"))
}
