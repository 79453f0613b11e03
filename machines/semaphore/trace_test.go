package semaphore_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Every call is a span named after the operation, a child of the
// caller's, with the engine's request spans below it; a failed call's
// span has the Error status and error.type.
func TestSpans(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("test").Start(ctxT(t), "request")
	c := sim.Connect()
	s := newSem(t, c, "/sem/traced", 2, semaphore.WithTracerProvider(tp))
	ls, err := s.AcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire = %t, %v", ok, err)
	}
	for _, l := range ls {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	bad := newSem(t, c, "/sem/traced", 3, semaphore.WithTracerProvider(tp))
	if _, err := bad.Acquire(ctx); !errors.Is(err, semaphore.ErrMaxLeasesMismatch) {
		t.Fatalf("mismatched Acquire = %v", err)
	}
	parent.End()

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, sp := range sr.Ended() {
		byName[sp.Name()] = append(byName[sp.Name()], sp)
	}
	for name, n := range map[string]int{"semaphore.acquire_n /sem/traced": 1, "semaphore.try_acquire /sem/traced": 1, "semaphore.acquire /sem/traced": 2, "semaphore.release /sem/traced": 3} {
		if got := len(byName[name]); got != n {
			t.Errorf("%d %s spans, want %d", got, name, n)
		}
		for _, sp := range byName[name] {
			if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("%s is not a child of the caller's span", name)
			}
		}
	}
	acqN := byName["semaphore.acquire_n /sem/traced"][0]
	creates := 0
	for _, sp := range byName["create /sem/traced/leases"] {
		if sp.Parent().SpanID() == acqN.SpanContext().SpanID() {
			creates++
		}
	}
	if creates < 2 { // and the leases directory's, the first time
		t.Errorf("%d creates under semaphore.acquire_n, want the 2 leases' at least", creates)
	}
	failed := byName["semaphore.acquire /sem/traced"][1]
	if failed.Status().Code != codes.Error || !hasAttr(failed.Attributes(), attribute.String("error.type", "max_leases_mismatch")) {
		t.Errorf("the mismatched acquire's span: status %v, attributes %v", failed.Status(), failed.Attributes())
	}
}

func hasAttr(kvs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, kv := range kvs {
		if kv == want {
			return true
		}
	}
	return false
}

// A nil Option (a conditional option left unset) is ignored: New neither
// panics nor skips the options after it.
func TestNilOptionIsIgnored(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	c := sim.Connect()
	s, err := semaphore.New(c, "/x", 1, nil)
	if err != nil {
		t.Fatalf("New with a nil Option = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := semaphore.New(c, "/x", 1, nil, semaphore.WithCloseTimeout(0)); !errors.Is(err, semaphore.ErrInvalidOption) {
		t.Fatalf("an option after a nil one: New = %v, want ErrInvalidOption", err)
	}
}
