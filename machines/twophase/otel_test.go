package twophase_test

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// The coordinator's "twophase.propose <root>" (the transaction id an
// attribute, never in the name) holds "twophase.prepare <root>" and
// "twophase.decide <root>", and the requests as CLIENT children, none
// failed in a first, clean transaction; the participant's handler calls are
// spans under "twophase.participate <root>"; the decided transactions are
// counted by outcome.
func TestOtelPropose(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	rec := oteltest.New(t)
	ctx, parent := rec.TP.Tracer("test").Start(ctxT(t), "request")
	pconn := sim.Connect()
	h := newRec()
	p, err := twophase.NewParticipant(pconn, root, "a", h, twophase.WithTracerProvider(rec.TP), twophase.WithMeterProvider(rec.MP))
	if err != nil {
		t.Fatal(err)
	}
	serveDone := make(chan error, 1)
	sctx, cancel := context.WithCancel(ctxT(t))
	go func() { serveDone <- p.Serve(sctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-serveDone
			p.Close()
		})
	}
	defer stop()
	waitExists(t, pconn, root+"/participants/a")
	c := newCoordinator(t, sim.Connect(), twophase.WithTracerProvider(rec.TP), twophase.WithMeterProvider(rec.MP))
	for _, tx := range []string{"tx1", "tx2"} {
		if out, err := c.Propose(ctx, tx, nil, []string{"a"}); err != nil || !out.Committed {
			t.Fatalf("Propose %s: %+v %v", tx, out, err)
		}
	}
	h.outcome(t, ctxT(t), "tx1")
	h.outcome(t, ctxT(t), "tx2") // the participant's commits are done
	parent.End()
	stop()
	rec.CheckConventions(t)

	props := rec.Named("twophase.propose " + root)
	if len(props) != 2 {
		t.Fatalf("%d propose spans, want 2:%s", len(props), rec.Names())
	}
	for i, s := range props {
		oteltest.WantAttrs(t, s, attribute.String("zkrecipes.twophase.tx", []string{"tx1", "tx2"}[i]),
			attribute.Int("zkrecipes.twophase.participants", 1), attribute.Bool("zkrecipes.twophase.committed", true))
		if s.SpanKind() != trace.SpanKindInternal || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("propose span: kind %v, not the caller's child", s.SpanKind())
		}
		var names []string
		for _, k := range rec.Children(s) {
			names = append(names, k.Name())
			if k.Status().Code == codes.Error {
				t.Errorf("%q under propose failed: %s", k.Name(), oteltest.Attr(k, "error.type"))
			}
		}
		for _, want := range []string{"twophase.prepare " + root, "twophase.decide " + root, "multi " + root} {
			found := false
			for _, n := range names {
				found = found || n == want
			}
			if !found {
				t.Errorf("no %q under propose %d: %v", want, i, names)
			}
		}
	}
	for _, s := range rec.Named("twophase.prepare " + root) {
		if s.Parent().IsValid() && oteltest.Attr(s, "zkrecipes.instance") == "a" {
			par := rec.Named("twophase.participate " + root)
			ok := false
			for _, ps := range par {
				ok = ok || ps.SpanContext().SpanID() == s.Parent().SpanID()
			}
			if !ok {
				t.Errorf("the participant's prepare is not under its participate span")
			}
		}
	}
	if n := len(rec.Named("twophase.commit " + root)); n != 2 {
		t.Errorf("%d participant commit spans, want 2:%s", n, rec.Names())
	}
	txs := rec.Metric(t, twophase.ScopeName, "zkrecipes.twophase.transactions")
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "zkrecipes.twophase.transactions", Unit: "{transaction}",
		Description: "Transactions decided by a coordinator, by outcome (committed, aborted) and abort reason.",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{{
			Attributes: attribute.NewSet(attribute.String("zkrecipes.recipe", "twophase"), attribute.String("zkrecipes.outcome", "committed")),
			Value:      2,
		}}},
	}, txs, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}
