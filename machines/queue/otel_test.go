package queue_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Offer is a PRODUCER span "queue.offer <dir>", Take a CONSUMER span
// "queue.take <dir>" naming the item's node, by the messaging conventions;
// their requests are CLIENT children; a take from a queue whose path is not
// made yet fails no request; the counters count the items.
func TestOtelOfferTake(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	rec := oteltest.New(t)
	c := sim.Connect()
	const dir = "/otel/queue"
	q := newQueue(t, c, dir, queue.WithTracerProvider(rec.TP), queue.WithMeterProvider(rec.MP))
	ctx, parent := rec.TP.Tracer("test").Start(ctxT(t), "request")
	if _, err := q.Poll(ctx); err == nil {
		t.Fatal("Poll on a queue never offered to: want ErrEmpty")
	}
	offer(t, ctx, q, "a", "b")
	if got := take(t, ctx, q); got != "a" {
		t.Fatalf("took %q", got)
	}
	item, err := q.TakeItem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := item.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()
	rec.CheckConventions(t)

	for _, s := range rec.Ended() {
		if s.Status().Code == codes.Error {
			t.Errorf("span %q failed in a clean run: %s", s.Name(), oteltest.Attr(s, "error.type"))
		}
	}
	offers := rec.Named("queue.offer " + dir)
	takes := rec.Named("queue.take " + dir)
	if len(offers) != 2 || len(takes) != 2 {
		t.Fatalf("%d offer and %d take spans, want 2 each:%s", len(offers), len(takes), rec.Names())
	}
	for _, s := range offers {
		if s.SpanKind() != trace.SpanKindProducer || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("offer span kind %v, not the caller's child", s.SpanKind())
		}
		oteltest.WantAttrs(t, s, attribute.String("messaging.system", "zookeeper"), attribute.String("messaging.destination.name", dir),
			attribute.String("messaging.operation.type", "send"))
		if len(rec.Children(s)) == 0 {
			t.Error("an offer span has no request under it")
		}
	}
	for _, s := range takes {
		if s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("take span kind %v", s.SpanKind())
		}
		oteltest.WantAttrs(t, s, attribute.String("messaging.operation.type", "receive"))
		if oteltest.Attr(s, "zookeeper.node") == "" {
			t.Error("a take span does not name its item's node")
		}
	}
	poll := rec.Only(t, "queue.poll "+dir)
	if poll.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("poll span kind %v", poll.SpanKind())
	}
	ack := rec.Only(t, "queue.ack "+dir)
	oteltest.WantAttrs(t, ack, attribute.String("zookeeper.node", item.Node()), attribute.String("messaging.operation.type", "settle"))

	sent := rec.Metric(t, queue.ScopeName, "messaging.client.sent.messages")
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "messaging.client.sent.messages", Unit: "{message}", Description: "Items offered to a queue.",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{{
			Attributes: attribute.NewSet(attribute.String("messaging.operation.name", "send"), attribute.String("messaging.system", "zookeeper"),
				attribute.String("messaging.destination.name", dir)),
			Value: 2,
		}}},
	}, sent, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	consumed := rec.Metric(t, queue.ScopeName, "messaging.client.consumed.messages")
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "messaging.client.consumed.messages", Unit: "{message}", Description: "Items taken, polled or claimed from a queue.",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{{
			Attributes: attribute.NewSet(attribute.String("messaging.operation.name", "receive"), attribute.String("messaging.system", "zookeeper"),
				attribute.String("messaging.destination.name", dir)),
			Value: 2,
		}}},
	}, consumed, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}
