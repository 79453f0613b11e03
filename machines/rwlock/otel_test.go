package rwlock_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Both sides' calls are "rwlock.<op> <dir>" spans with the side in
// zkrecipes.rwlock.mode, their requests CLIENT children; a first acquire in
// a new directory has no failed request; holds are zkrecipes.hold.duration
// points.
func TestOtelReadWrite(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	rec := oteltest.New(t)
	c := sim.Connect()
	const dir = "/otel/rwlock"
	rw := newRW(t, c, dir, rwlock.WithTracerProvider(rec.TP), rwlock.WithMeterProvider(rec.MP))
	ctx, parent := rec.TP.Tracer("test").Start(ctxT(t), "request")
	w := acq(t, ctx, rw.WriteLock())
	rel(t, ctx, rw.WriteLock())
	r := acq(t, ctx, rw.ReadLock())
	rel(t, ctx, rw.ReadLock())
	parent.End()
	rec.CheckConventions(t)

	acqs := rec.Named("rwlock.acquire " + dir)
	rels := rec.Named("rwlock.release " + dir)
	if len(acqs) != 2 || len(rels) != 2 {
		t.Fatalf("%d acquire and %d release spans, want 2 each:%s", len(acqs), len(rels), rec.Names())
	}
	for i, mode := range []string{"write", "read"} {
		node := w.Node()
		if mode == "read" {
			node = r.Node()
		}
		oteltest.WantAttrs(t, acqs[i], attribute.String("zkrecipes.rwlock.mode", mode), attribute.String("zkrecipes.recipe", "rwlock"),
			attribute.String("zookeeper.node", node))
		oteltest.WantAttrs(t, rels[i], attribute.String("zkrecipes.rwlock.mode", mode))
		if acqs[i].SpanKind() != trace.SpanKindInternal || acqs[i].Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s acquire span: kind %v, not the caller's child", mode, acqs[i].SpanKind())
		}
		kids := rec.Children(acqs[i])
		if len(kids) == 0 {
			t.Errorf("%s acquire span has no request under it", mode)
		}
		for _, k := range kids {
			if k.SpanKind() != trace.SpanKindClient || k.Status().Code == codes.Error {
				t.Errorf("request %q under the %s acquire: kind %v status %v", k.Name(), mode, k.SpanKind(), k.Status())
			}
		}
	}
	hold := rec.Metric(t, rwlock.ScopeName, "zkrecipes.hold.duration")
	metricdatatest.AssertHasAttributes(t, hold, attribute.String("zkrecipes.recipe", "rwlock"),
		attribute.String("zkrecipes.outcome", "released"))
	if pts := hold.Data.(metricdata.Histogram[float64]).DataPoints; len(pts) != 1 || pts[0].Count != 2 {
		t.Errorf("hold.duration points %+v, want one of count 2", pts)
	}
}
