package semaphore_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// "semaphore.acquire <path>" (INTERNAL, the caller's child) holds the
// maxLeases check's requests and the lease's; in a new path none of them
// fails (no_node there is a step); the lease's facts are on the span, and
// its hold is a zkrecipes.hold.duration point. On both targets.
func TestOtelAcquireRelease(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		rec := oteltest.New(t)
		c := tg.Connect(t)
		dir := "/otel/semaphore/" + tg.Name()
		s := newSem(t, c, dir, 2, semaphore.WithTracerProvider(rec.TP), semaphore.WithMeterProvider(rec.MP))
		ctx, parent := rec.TP.Tracer("test").Start(ctxT(t), "request")
		l, err := s.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		parent.End()
		rec.CheckConventions(t)
		acq := rec.Only(t, "semaphore.acquire "+dir)
		if acq.SpanKind() != trace.SpanKindInternal || acq.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("acquire span: kind %v, not the caller's child", acq.SpanKind())
		}
		oteltest.WantAttrs(t, acq, attribute.String("zkrecipes.recipe", "semaphore"), attribute.String("zkrecipes.path", dir),
			attribute.Int("zkrecipes.semaphore.max_leases", 2), attribute.Int("zkrecipes.semaphore.leases", 1),
			attribute.String("zookeeper.node", l.Node()), attribute.Int64("zookeeper.czxid", l.Token()))
		kids := rec.Children(acq)
		var check, lease bool
		for _, k := range kids {
			if k.SpanKind() != trace.SpanKindClient || k.Status().Code == codes.Error {
				t.Errorf("request %q under the acquire: kind %v, status %v %s", k.Name(), k.SpanKind(), k.Status(), oteltest.Attr(k, "error.type"))
			}
			check = check || k.Name() == "get "+dir
			lease = lease || k.Name() == "create "+dir+"/leases"
		}
		if !check || !lease {
			t.Errorf("under the acquire: the check's get %t, the lease's create %t:%s", check, lease, rec.Names())
		}
		rec.Only(t, "semaphore.release "+dir)
		hold := rec.Metric(t, semaphore.ScopeName, "zkrecipes.hold.duration")
		metricdatatest.AssertHasAttributes(t, hold, attribute.String("zkrecipes.recipe", "semaphore"),
			attribute.String("zkrecipes.outcome", "released"))
		ops := rec.Metric(t, semaphore.ScopeName, "db.client.operation.duration")
		metricdatatest.AssertHasAttributes(t, ops, attribute.String("db.system.name", "zookeeper"))
	})
}
