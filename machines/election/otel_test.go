package election_test

import (
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
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Quick campaigns and resigns in a new directory: "election.campaign
// <dir>" ends at the grant with its facts and event, "election.resign
// <dir>" holds its delete; no request starts after its parent ended, none
// of a clean run fails, and each term's length is a zkrecipes.hold.duration
// point.
func TestOtelCampaignResign(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		rec := oteltest.New(t)
		c := tg.Connect(t)
		dir := "/otel/election/" + strings.ReplaceAll(t.Name(), "/", "_")
		e := newElection(t, c, dir, "node-1", election.WithTracerProvider(rec.TP), election.WithMeterProvider(rec.MP))
		ctx, parent := rec.TP.Tracer("test").Start(ctxT(t), "request")
		var nodes []string
		for range 3 {
			term, err := e.Campaign(ctx)
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, term.Node())
			if err := e.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		}
		parent.End()
		rec.CheckConventions(t)

		camps := rec.Named("election.campaign " + dir)
		if len(camps) != 3 {
			t.Fatalf("%d campaign spans, want 3:%s", len(camps), rec.Names())
		}
		for i, s := range camps {
			if s.SpanKind() != trace.SpanKindInternal || s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("campaign span: kind %v, not the caller's child", s.SpanKind())
			}
			oteltest.WantAttrs(t, s, attribute.String("zkrecipes.recipe", "election"), attribute.String("zkrecipes.instance", "node-1"),
				attribute.String("zookeeper.node", nodes[i]), attribute.String("zookeeper.session.id", fmt.Sprintf("%#x", c.SessionID())))
			if oteltest.Attr(s, "zookeeper.czxid") == "" || !oteltest.HasEvent(s, events.ElectedComplete.String()) {
				t.Errorf("campaign span without its grant: %v %v", s.Attributes(), s.Events())
			}
		}
		resigns := rec.Named("election.resign " + dir)
		if len(resigns) != 3 {
			t.Fatalf("%d resign spans, want 3", len(resigns))
		}
		for _, r := range resigns {
			var del bool
			for _, k := range rec.Children(r) {
				del = del || (k.SpanKind() == trace.SpanKindClient && (k.Name() == "delete "+dir || k.Name() == "multi "+dir))
			}
			if !del {
				t.Errorf("a resign span has no delete under it:%s", rec.Names())
			}
		}
		for _, s := range rec.Ended() {
			if s.Status().Code == codes.Error {
				t.Errorf("span %q failed in a clean run: %s", s.Name(), oteltest.Attr(s, "error.type"))
			}
		}
		hold := rec.Metric(t, election.ScopeName, "zkrecipes.hold.duration")
		metricdatatest.AssertEqual(t, metricdata.Metrics{
			Name: "zkrecipes.hold.duration", Unit: "s",
			Description: "Time from a grant (lock held, leadership, lease) to its end: released or lost.",
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{{
				Attributes: attribute.NewSet(attribute.String("zkrecipes.recipe", "election"), attribute.String("zkrecipes.path", dir),
					attribute.String("zkrecipes.outcome", "released")),
				Count: 3,
			}}},
		}, hold, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreValue(), metricdatatest.IgnoreExemplars())
	})
}

// A term lost to the session's expiry (SUSPENDED not counted as lost)
// ends its hold with outcome session_lost.
func TestOtelHoldLost(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	rec := oteltest.New(t)
	c := sim.Connect()
	const dir = "/otel/election/lost"
	e := newElection(t, c, dir, "node-1", election.WithMeterProvider(rec.MP), election.WithTracerProvider(rec.TP),
		election.WithSuspendedIsLost(false))
	sub := e.Subscribe()
	defer sub.Close()
	term, err := e.Campaign(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	sim.Expire(c)
	<-term.Lost()
	testkit.WaitEvent(t, sub, events.Lost)
	hold := rec.Metric(t, election.ScopeName, "zkrecipes.hold.duration")
	metricdatatest.AssertHasAttributes(t, hold, attribute.String("zkrecipes.outcome", "session_lost"))
}
