package cache_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Initialized is a "cache.initialized <path>" span under its caller; the
// load's requests are CLIENT spans "get <path>" and "children <path>",
// each naming its node, none failed (an absent node is no failure); their
// durations are measured with the recipe's attributes.
func TestOtel(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	ctx := ctxT(t)
	w := sim.Connect()
	const path = "/otel/tree"
	mk(ctx, t, w, path+"/a/b", "x")
	rec := oteltest.New(t)
	tc := must[*cache.TreeCache](t)(cache.NewTree(sim.Connect(), path, cache.WithTracerProvider(rec.TP), cache.WithMeterProvider(rec.MP)))
	closeOnCleanup(t, tc)
	nc := must[*cache.NodeCache](t)(cache.NewNode(sim.Connect(), path+"/absent", cache.WithTracerProvider(rec.TP), cache.WithMeterProvider(rec.MP)))
	closeOnCleanup(t, nc)
	cctx, parent := rec.TP.Tracer("test").Start(ctx, "request")
	if err := tc.Initialized(cctx); err != nil {
		t.Fatal(err)
	}
	if err := nc.Initialized(cctx); err != nil {
		t.Fatal(err)
	}
	parent.End()
	rec.CheckConventions(t)
	s := rec.Only(t, "cache.initialized "+path)
	if s.SpanKind() != trace.SpanKindInternal || s.Parent().SpanID() != parent.SpanContext().SpanID() || s.Status().Code == codes.Error {
		t.Errorf("initialized span: kind %v, status %v, not the caller's child", s.SpanKind(), s.Status())
	}
	nodes := map[string]bool{}
	for _, name := range []string{"get " + path, "children " + path, "get " + path + "/absent", "exists " + path + "/absent"} {
		spans := rec.Named(name)
		if len(spans) == 0 {
			t.Errorf("no %q span:%s", name, rec.Names())
		}
		for _, k := range spans {
			nodes[oteltest.Attr(k, "zookeeper.node")] = true
			if k.SpanKind() != trace.SpanKindClient || k.Status().Code == codes.Error {
				t.Errorf("%s: kind %v, status %v", name, k.SpanKind(), k.Status())
			}
			oteltest.WantAttrs(t, k, attribute.String("zkrecipes.recipe", "cache"))
		}
	}
	for _, n := range []string{path, path + "/a", path + "/a/b", path + "/absent"} {
		if !nodes[n] {
			t.Errorf("no request names %s: %v", n, nodes)
		}
	}
	ops := rec.Metric(t, cache.ScopeName, "db.client.operation.duration")
	metricdatatest.AssertHasAttributes(t, ops, attribute.String("db.system.name", "zookeeper"), attribute.String("zkrecipes.recipe", "cache"))
}
