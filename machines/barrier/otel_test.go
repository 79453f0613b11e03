package barrier_test

import (
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A Barrier's calls are "barrier.<op> <path>" spans, each request a CLIENT
// child naming the node; Set in a new path and Remove fail no request.
func TestOtelBarrier(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	rec := oteltest.New(t)
	const path = "/otel/barrier/b"
	b, err := barrier.New(sim.Connect(), path, barrier.WithTracerProvider(rec.TP), barrier.WithMeterProvider(rec.MP))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := rec.TP.Tracer("test").Start(ctxT(t), "request")
	for _, f := range []func() error{func() error { return b.Set(ctx) }, func() error { return b.Remove(ctx) }, func() error { return b.Wait(ctx) }} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	parent.End()
	rec.CheckConventions(t)
	for _, op := range []string{"set", "remove", "wait"} {
		s := rec.Only(t, "barrier."+op+" "+path)
		if s.SpanKind() != trace.SpanKindInternal || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s span: kind %v, not the caller's child", op, s.SpanKind())
		}
		kids := rec.Children(s)
		if len(kids) == 0 {
			t.Errorf("%s span has no request under it", op)
		}
		for _, k := range kids {
			if k.SpanKind() != trace.SpanKindClient || k.Status().Code == codes.Error || oteltest.Attr(k, "zookeeper.node") == "" {
				t.Errorf("request %q under %s: kind %v, status %v, node %q", k.Name(), op, k.SpanKind(), k.Status(), oteltest.Attr(k, "zookeeper.node"))
			}
		}
	}
	ops := rec.Metric(t, barrier.ScopeName, "db.client.operation.duration")
	metricdatatest.AssertHasAttributes(t, ops, attribute.String("db.system.name", "zookeeper"), attribute.String("zkrecipes.recipe", "barrier"))
}

// Each member's Enter and Leave are "barrier.enter <path>" and
// "barrier.leave <path>" spans with the member count, their requests CLIENT
// children or, once the call has returned, roots linked to it.
func TestOtelDoubleBarrier(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	rec := oteltest.New(t)
	const path = "/otel/barrier/double"
	ctx, parent := rec.TP.Tracer("test").Start(ctxT(t), "request")
	var ds []*barrier.DoubleBarrier
	for range 2 {
		ds = append(ds, newDouble(t, sim.Connect(), path, 2, barrier.WithTracerProvider(rec.TP), barrier.WithMeterProvider(rec.MP)))
	}
	for _, step := range []func(d *barrier.DoubleBarrier) error{
		func(d *barrier.DoubleBarrier) error { return d.Enter(ctx) },
		func(d *barrier.DoubleBarrier) error { return d.Leave(ctx) },
	} {
		var wg sync.WaitGroup
		errs := make([]error, len(ds))
		for i, d := range ds {
			wg.Go(func() { errs[i] = step(d) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	parent.End()
	rec.CheckConventions(t)
	for _, op := range []string{"enter", "leave"} {
		spans := rec.Named("barrier." + op + " " + path)
		if len(spans) != 2 {
			t.Fatalf("%d %s spans, want 2:%s", len(spans), op, rec.Names())
		}
		for _, s := range spans {
			oteltest.WantAttrs(t, s, attribute.Int("zkrecipes.barrier.members", 2), attribute.String("zkrecipes.recipe", "barrier"))
			if s.SpanKind() != trace.SpanKindInternal || s.Parent().SpanID() != parent.SpanContext().SpanID() || s.Status().Code == codes.Error {
				t.Errorf("%s span: kind %v, status %v", op, s.SpanKind(), s.Status())
			}
			if len(rec.Children(s)) == 0 {
				t.Errorf("a %s span has no request under it", op)
			}
		}
	}
}
