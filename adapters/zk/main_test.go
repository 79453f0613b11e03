package zk

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopSharedServer()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// connect opens a Conn to addr, closed at the end of the test.
func connect(t testing.TB, addr string, opts ...Option) Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, []string{addr}, opts...)
	if err != nil {
		t.Fatalf("Connect(%s): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testCtx is a context that ends with the test, at the latest after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testRoot creates a fresh persistent node for one test and returns it.
func testRoot(t testing.TB, c Conn) string {
	t.Helper()
	p, err := c.Create(testCtx(t, 10*time.Second), "/t-", nil, ModePersistentSequential)
	if err != nil {
		t.Fatalf("create test root: %v", err)
	}
	return p
}

// recorder collects a Conn's session events.
type recorder struct {
	ch      chan SessionEvent
	dropped atomic.Int64
}

func record(t testing.TB, c Conn) *recorder {
	r := &recorder{ch: make(chan SessionEvent, 1024)}
	cancel := c.Subscribe(func(ev SessionEvent) {
		select {
		case r.ch <- ev:
		default:
			r.dropped.Add(1)
		}
	})
	t.Cleanup(func() {
		cancel()
		if n := r.dropped.Load(); n > 0 {
			t.Errorf("recorder dropped %d session events", n)
		}
	})
	return r
}

// next returns the next session event, failing the test after timeout.
func (r *recorder) next(t testing.TB, timeout time.Duration) SessionEvent {
	t.Helper()
	select {
	case ev := <-r.ch:
		return ev
	case <-time.After(timeout):
		t.Fatalf("no session event within %v", timeout)
		return SessionEvent{}
	}
}

// expect reads the next events and fails unless their states are want.
func (r *recorder) expect(t testing.TB, timeout time.Duration, want ...SessionState) []SessionEvent {
	t.Helper()
	got := make([]SessionEvent, 0, len(want))
	for _, w := range want {
		ev := r.next(t, timeout)
		got = append(got, ev)
		if ev.State != w {
			t.Fatalf("session events %v, want states %v", got, want)
		}
	}
	return got
}

// none fails if an event is pending.
func (r *recorder) none(t testing.TB) {
	t.Helper()
	select {
	case ev := <-r.ch:
		t.Fatalf("unexpected session event %+v", ev)
	default:
	}
}

// waitWatch returns the one event of a watch channel and checks that the
// channel is closed after it.
func waitWatch(t testing.TB, ch <-chan WatchEvent, timeout time.Duration) WatchEvent {
	t.Helper()
	if ch == nil {
		t.Fatal("nil watch channel")
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var ev WatchEvent
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed without an event")
		}
		ev = e
	case <-timer.C:
		t.Fatalf("no watch event within %v", timeout)
	}
	select {
	case e, ok := <-ch:
		if ok {
			t.Fatalf("second watch event %+v", e)
		}
	case <-timer.C:
		t.Fatal("watch channel not closed after its event")
	}
	return ev
}

// noWatch fails if a watch channel has an event ready.
func noWatch(t testing.TB, ch <-chan WatchEvent) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected watch event %+v", ev)
	default:
	}
}
