package discovery_test

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Register and Update are "discovery.register <service>" and
// "discovery.update <service>" spans of discovery's scope under their
// caller, each over its group member's span and requests (the create of
// our node, the set); a refused Register fails with error.type
// instance_exists. A Provider's reads go to the same provider.
func TestOtel(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	ctx := ctxT(t)
	rec := oteltest.New(t)
	opts := []discovery.Option{discovery.WithTracerProvider(rec.TP), discovery.WithMeterProvider(rec.MP)}
	p := must[*discovery.Provider](t)(discovery.NewProvider(sim.Connect(), "/services", "api", opts...))
	closeOnCleanup(t, p)
	cctx, parent := rec.TP.Tracer("test").Start(ctx, "request")
	r := must[*discovery.Registration](t)(discovery.Register(cctx, sim.Connect(), "/services", inst("i-1", 5), opts...))
	if err := r.Update(cctx, inst("i-1", 6)); err != nil {
		t.Fatal(err)
	}
	if _, err := discovery.Register(cctx, sim.Connect(), "/services", inst("i-1", 7), opts...); !errors.Is(err, discovery.ErrInstanceExists) {
		t.Fatalf("second Register: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Initialized(cctx); err != nil {
		t.Fatal(err)
	}
	parent.End()
	rec.CheckConventions(t)

	regs := rec.Named("discovery.register /services/api")
	if len(regs) != 2 {
		t.Fatalf("%d register spans:%s", len(regs), rec.Names())
	}
	ok, refused := regs[0], regs[1]
	if ok.Status().Code == codes.Error {
		ok, refused = refused, ok
	}
	if refused.Status().Code != codes.Error || oteltest.Attr(refused, "error.type") != "instance_exists" {
		t.Errorf("refused register span: status %v, error.type %q", refused.Status(), oteltest.Attr(refused, "error.type"))
	}
	for op, child := range map[string]string{"register": "group.join /services/api", "update": "group.set /services/api"} {
		s := ok
		if op == "update" {
			s = rec.Only(t, "discovery.update /services/api")
		}
		if s.InstrumentationScope().Name != discovery.ScopeName || s.SpanKind() != trace.SpanKindInternal ||
			s.Parent().SpanID() != parent.SpanContext().SpanID() || s.Status().Code == codes.Error {
			t.Errorf("%s span: scope %q kind %v status %v, parent ours %t", op, s.InstrumentationScope().Name, s.SpanKind(),
				s.Status(), s.Parent().SpanID() == parent.SpanContext().SpanID())
		}
		oteltest.WantAttrs(t, s, attribute.String("zkrecipes.recipe", "discovery"))
		kids := rec.Children(s)
		if len(kids) != 1 || kids[0].Name() != child || len(rec.Children(kids[0])) == 0 {
			t.Errorf("%s span's children: %d, want one %s with its requests:%s", op, len(kids), child, rec.Names())
		}
	}
	if len(rec.Named("children /services/api")) == 0 {
		t.Errorf("the provider's reads are not on the provider:%s", rec.Names())
	}
}
