package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A first acquire in a directory that does not exist yet: the span
// "lock.acquire <dir>", INTERNAL, a child of the caller's, ends at the
// grant with the grant's facts and an ELECTED_COMPLETE event; its requests
// are CLIENT children "<op> <dir>", the create that found no directory
// among them with no error (an expected step); the release's multi is a
// child of "lock.release <dir>". On both targets.
func TestOtelAcquireRelease(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		rec := oteltest.New(t)
		c := tg.Connect(t)
		dir := "/otel/lock/" + strings.ReplaceAll(t.Name(), "/", "_")
		l := newLock(t, c, dir, lock.WithTracerProvider(rec.TP), lock.WithMeterProvider(rec.MP), lock.WithID("worker-1"))
		ctx, parent := rec.TP.Tracer("test").Start(ctxT(t), "request")
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		parent.End()
		rec.CheckConventions(t)

		acq := rec.Only(t, "lock.acquire "+dir)
		if acq.SpanKind() != trace.SpanKindInternal || acq.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("acquire span: kind %v, parent %v", acq.SpanKind(), acq.Parent().SpanID())
		}
		if acq.Status().Code != codes.Unset {
			t.Errorf("a clean acquire's span has status %v", acq.Status())
		}
		oteltest.WantAttrs(t, acq,
			attribute.String("db.system.name", "zookeeper"),
			attribute.String("zkrecipes.recipe", "lock"),
			attribute.String("zkrecipes.path", dir),
			attribute.String("zkrecipes.instance", "worker-1"),
			attribute.String("zookeeper.node", g.Node()),
			attribute.Int64("zookeeper.czxid", g.Token()),
			attribute.String("zookeeper.session.id", fmt.Sprintf("%#x", c.SessionID())),
			attribute.Bool("zkrecipes.acquired", true))
		if !oteltest.HasEvent(acq, events.ElectedComplete.String()) {
			t.Errorf("no grant event on the acquire span: %v", acq.Events())
		}
		rel := rec.Only(t, "lock.release "+dir)
		if rel.StartTime().Before(acq.EndTime()) {
			t.Error("the acquire span covers the hold; it must end at the grant")
		}

		var sawNoNode bool
		for _, s := range rec.Children(acq) {
			if s.SpanKind() != trace.SpanKindClient || !strings.HasSuffix(s.Name(), " "+dir) {
				t.Errorf("request span %v %q", s.SpanKind(), s.Name())
			}
			if s.Status().Code == codes.Error {
				t.Errorf("a clean acquire's request %q failed: %s", s.Name(), oteltest.Attr(s, "error.type"))
			}
			if s.Name() == "create "+dir && oteltest.Attr(s, "zookeeper.result") == "no_node" {
				sawNoNode = true
			}
		}
		if !sawNoNode {
			t.Errorf("no create with the expected no_node result under the acquire:%s", rec.Names())
		}
		var created bool
		for _, s := range rec.Named("create " + dir) {
			created = created || oteltest.Attr(s, "zookeeper.node") == g.Node()
		}
		if !created {
			t.Error("no create span names the node it made (zookeeper.node)")
		}
		multi := rec.Only(t, "multi "+dir)
		if multi.Parent().SpanID() != rel.SpanContext().SpanID() || oteltest.Attr(multi, "zookeeper.node") != g.Node() {
			t.Errorf("release's multi: parent %v, node %q", multi.Parent().SpanID(), oteltest.Attr(multi, "zookeeper.node"))
		}
		if tg.Name() != "sim" {
			if oteltest.Attr(multi, "server.address") == "" || oteltest.Attr(multi, "server.port") == "" {
				t.Errorf("a request on a server has no server.address/port: %v", multi.Attributes())
			}
		}

		// Instruments: the requests' durations and the hold's.
		hold := rec.Metric(t, lock.ScopeName, "zkrecipes.hold.duration")
		metricdatatest.AssertEqual(t, metricdata.Metrics{
			Name: "zkrecipes.hold.duration", Unit: "s",
			Description: "Time from a grant (lock held, leadership, lease) to its end: released or lost.",
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{{
				Attributes: attribute.NewSet(attribute.String("zkrecipes.recipe", "lock"), attribute.String("zkrecipes.path", dir),
					attribute.String("zkrecipes.outcome", "released")),
				Count: 1,
			}}},
		}, hold, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreValue(), metricdatatest.IgnoreExemplars())
		ops := rec.Metric(t, lock.ScopeName, "db.client.operation.duration")
		metricdatatest.AssertHasAttributes(t, ops, attribute.String("db.system.name", "zookeeper"), attribute.String("zkrecipes.recipe", "lock"))
		var opNames []string
		for _, dp := range ops.Data.(metricdata.Histogram[float64]).DataPoints {
			v, _ := dp.Attributes.Value("db.operation.name")
			opNames = append(opNames, v.AsString())
		}
		for _, want := range []string{"create", "children", "multi"} {
			if !contains(opNames, want) {
				t.Errorf("db.client.operation.duration has no %q point: %v", want, opNames)
			}
		}
	})
}

// A cancelled wait: the acquire span fails with error.type canceled, and
// the session's SUSPENDED and RECONNECTED while it waited are events on it.
func TestOtelCancelAndSessionEvents(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	rec := oteltest.New(t)
	c, other := sim.Connect(), sim.Connect()
	const dir = "/otel/lock/wait"
	ensureDir(t, other, dir)
	holder := newLock(t, other, dir)
	if _, err := holder.Acquire(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waiter := newLock(t, c, dir, lock.WithTracerProvider(rec.TP), lock.WithSuspendedIsLost(false))
	sub := waiter.Subscribe()
	defer sub.Close()
	ctx, cancel := context.WithCancel(ctxT(t))
	res := acquireAsync(ctx, waiter)
	testkit.WaitEvent(t, sub, events.ReadyStart)
	sim.Disconnect(c)
	testkit.WaitEvent(t, sub, events.Suspended)
	sim.Reconnect(c)
	testkit.WaitEvent(t, sub, events.Reconnected)
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	if err := waiter.Close(); err != nil {
		t.Fatal(err)
	}
	rec.CheckConventions(t)
	acq := rec.Only(t, "lock.acquire "+dir)
	if acq.Status().Code != codes.Error || oteltest.Attr(acq, "error.type") != "canceled" {
		t.Errorf("cancelled acquire: status %v, error.type %q", acq.Status(), oteltest.Attr(acq, "error.type"))
	}
	for _, ev := range []string{"SUSPENDED", "RECONNECTED"} {
		if !oteltest.HasEvent(acq, ev) {
			t.Errorf("no %s event on the waiting acquire's span: %v", ev, acq.Events())
		}
	}
}

// A request made after its operation ended (the delete of a node whose
// create answered after the caller gave up) is a root span of its own,
// linked to the operation, never a child of the finished span.
func TestOtelBackgroundRequestIsLinkedRoot(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	rec := oteltest.New(t)
	c := sim.Connect()
	const dir = "/otel/lock/background"
	ensureDir(t, c, dir)
	l := newLock(t, c, dir, lock.WithTracerProvider(rec.TP))
	sub := l.Subscribe()
	defer sub.Close()
	held := sim.HoldNextReply(c, testkit.OpCreate, dir+"/")
	ctx, cancel := context.WithCancel(ctxT(t))
	res := acquireAsync(ctx, l)
	<-held.Fired()
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	held.Release()
	testkit.WaitEvent(t, sub, events.StopComplete)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rec.CheckConventions(t)
	acq := rec.Only(t, "lock.acquire "+dir)
	var bg []string
	for _, s := range rec.Ended() {
		if s.SpanKind() != trace.SpanKindClient || !s.StartTime().After(acq.EndTime()) {
			continue
		}
		bg = append(bg, s.Name())
		if s.Parent().IsValid() {
			t.Errorf("%q, made after the acquire ended, has a parent", s.Name())
		}
		if len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID() != acq.SpanContext().SpanID() {
			t.Errorf("%q is not linked to the acquire: %v", s.Name(), s.Links())
		}
	}
	if len(bg) == 0 {
		t.Fatalf("no request after the acquire ended:%s", rec.Names())
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
