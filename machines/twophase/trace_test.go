package twophase_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A Propose is one span, a child of the caller's, with a child span per
// phase: prepare (collecting the votes) and decide.
func TestSpans(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("test").Start(ctxT(t), "request")
	conn := sim.Connect()
	defer conn.Close()
	serve(t, conn, "a", newRec())
	c := newCoordinator(t, conn, twophase.WithTracerProvider(tp))
	if out, err := c.Propose(ctx, "tx1", nil, []string{"a"}); err != nil || !out.Committed {
		t.Fatalf("Propose: %+v %v", out, err)
	}
	parent.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range sr.Ended() {
		byName[sp.Name()] = sp
	}
	propose, ok := byName["twophase.propose /app/2pc"]
	if !ok {
		t.Fatalf("no propose span among %v", byName)
	}
	if propose.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("the propose span's parent is not the caller's span")
	}
	for _, name := range []string{"twophase.prepare /app/2pc", "twophase.decide /app/2pc"} {
		sp, ok := byName[name]
		if !ok {
			t.Errorf("no %s span", name)
			continue
		}
		if sp.Parent().SpanID() != propose.SpanContext().SpanID() {
			t.Errorf("%s is not a child of the propose span", name)
		}
	}
}
