package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestSpans(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	ctx := ctxT(t)
	c, other := sim.Connect(), sim.Connect()
	ensureDir(t, other, "/locks/traced") // so the acquire is one create, one read round
	l := newLock(t, c, "/locks/traced", lock.WithTracerProvider(tp))

	ctx, parent := tp.Tracer("test").Start(ctx, "request")
	if _, err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
		if s.Status().Code == codes.Ok {
			t.Errorf("span %s has status Ok; only Unset or Error are allowed", s.Name())
		}
		if strings.Contains(s.Name(), "_c_") || strings.ContainsAny(s.Name(), "0123456789") {
			t.Errorf("span %q is named after a node, not an operation and directory", s.Name())
		}
	}
	acq, rel := only(t, byName, "lock.acquire /locks/traced"), only(t, byName, "lock.release /locks/traced")
	if acq.Parent().SpanID() != parent.SpanContext().SpanID() || rel.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Error("acquire and release spans are not children of the caller's span")
	}
	if acq.EndTime().After(rel.StartTime()) {
		t.Error("the acquire span covers the hold; it must end at the grant")
	}
	// DETERMINE's two reads are both getChildren: the directory's, and
	// our node's (its stat, with a watch for its deletion).
	if n := len(byName["children /locks/traced"]); n != 2 {
		t.Errorf("want 2 children spans (directory and own node), got %d", n)
	}
	for name, parentSpan := range map[string]sdktrace.ReadOnlySpan{
		"create /locks/traced": acq,
		"multi /locks/traced":  rel,
	} {
		s := only(t, byName, name)
		if s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s kind %v, want client", name, s.SpanKind())
		}
		if s.Parent().SpanID() != parentSpan.SpanContext().SpanID() {
			t.Errorf("%s is not a child of %s", name, parentSpan.Name())
		}
	}
	for _, s := range byName["children /locks/traced"] {
		if s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != acq.SpanContext().SpanID() {
			t.Errorf("a children span is not a client child of %s", acq.Name())
		}
	}

	// A failed acquire: status Error with an error.type.
	sr2 := tracetest.NewSpanRecorder()
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr2))
	defer tp2.Shutdown(context.Background())
	holder := newLock(t, other, "/locks/traced")
	if _, err := holder.Acquire(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waiter := newLock(t, c, "/locks/traced", lock.WithTracerProvider(tp2))
	sub := waiter.Subscribe()
	defer sub.Close()
	wctx, cancel := context.WithCancel(ctxT(t))
	res := acquireAsync(wctx, waiter)
	testkit.WaitEvent(t, sub, events.ReadyStart)
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	var failed sdktrace.ReadOnlySpan
	for _, s := range sr2.Ended() {
		if s.Name() == "lock.acquire /locks/traced" {
			failed = s
		}
	}
	if failed == nil || failed.Status().Code != codes.Error || !hasAttr(failed, "error.type", "canceled") {
		t.Fatalf("cancelled acquire span: %+v", failed)
	}
}

func only(t *testing.T, byName map[string][]sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	if len(byName[name]) != 1 {
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		t.Fatalf("want one span %q, got %d (spans: %v)", name, len(byName[name]), names)
	}
	return byName[name][0]
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) && kv.Value.AsString() == value {
			return true
		}
	}
	return false
}

// TestZeroReadHandoff checks, from the ZooKeeper request spans, that a
// waiter behind a holder makes no request between the holder's release and
// its own grant: delete → notification → held.
func TestZeroReadHandoff(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, other := tg.Connect(t), tg.Connect(t)
		ensureDir(t, other, "/locks/handoff")
		holder := newLock(t, other, "/locks/handoff")
		if _, err := holder.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		sr := tracetest.NewSpanRecorder()
		ended := make(chan string, 100)
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithSpanProcessor(endNotifier(ended)))
		defer tp.Shutdown(context.Background())
		waiter := newLock(t, c, "/locks/handoff", lock.WithTracerProvider(tp))
		res := acquireAsync(ctx, waiter)
		// The waiter's requests: create, children + exists (own node), then
		// exists + children on the holder's node, which arm the watches.
		for reads := 0; reads < 4; {
			select {
			case name := <-ended:
				if name == "exists /locks/handoff" || name == "children /locks/handoff" {
					reads++
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the waiter's watch was not armed")
			}
		}
		before := len(sr.Ended())
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-res; r.err != nil {
			t.Fatal(r.err)
		}
		var after []string
		for _, s := range sr.Ended()[before:] {
			if s.SpanKind() == trace.SpanKindClient {
				after = append(after, s.Name())
			}
		}
		if len(after) != 0 {
			t.Fatalf("the waiter made requests after the holder released: %v", after)
		}
	})
}

// endNotifier is a span processor that sends each ended span's name.
type endNotifier chan<- string

func (n endNotifier) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (n endNotifier) OnEnd(s sdktrace.ReadOnlySpan)                   { n <- s.Name() }
func (n endNotifier) Shutdown(context.Context) error                  { return nil }
func (n endNotifier) ForceFlush(context.Context) error                { return nil }
