package testkit

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
)

// waitDeadline is how long WaitFor and Expect wait for one event.
var waitDeadline = 15 * time.Second

// Source is anything whose lifecycle events can be recorded: every recipe
// handle (lock, election, queue, barrier, ...) and events.Bus have this
// Subscribe.
type Source interface {
	Subscribe(opts ...events.SubscribeOption) *events.Subscription
}

// Recorder keeps every lifecycle event of one recipe handle, for a test to
// wait on and to print when it fails. Make one with Record. Its methods are
// safe for concurrent use.
//
// WaitFor and Expect consume: each looks only at the events after the last
// one a previous call returned, so a test reads the transcript forward, as
// the handle lived it. Events stays the whole transcript.
type Recorder struct {
	start time.Time
	sub   *events.Subscription
	done  chan struct{} // closed when the subscription's C has closed

	mu      sync.Mutex
	evs     []events.Event
	next    int           // index of the first event WaitFor has not passed
	changed chan struct{} // closed and replaced at each new event
}

// Record starts recording source's lifecycle events: the handle's START
// (every subscription gets it first), then those that happen from this
// call on (a handle replays nothing else of its past). Recording stops
// when the test ends (t.Cleanup closes the subscription), or earlier if the
// handle closes its subscriptions (Close does).
//
//	l, _ := lock.New(conn, "/app/lock")
//	rec := testkit.Record(t, l)
//	... // the code under test
//	rec.Expect(t, events.ElectedComplete, events.Lost)
func Record(t testing.TB, source Source) *Recorder {
	t.Helper()
	r := &Recorder{start: time.Now(), sub: source.Subscribe(), done: make(chan struct{}), changed: make(chan struct{})}
	go r.run()
	t.Cleanup(func() {
		r.sub.Close()
		<-r.done
	})
	return r
}

func (r *Recorder) run() {
	defer close(r.done)
	for ev := range r.sub.C {
		r.mu.Lock()
		r.evs = append(r.evs, ev)
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
}

// Events returns a copy of the events recorded so far, oldest first.
func (r *Recorder) Events() []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.Event(nil), r.evs...)
}

// WaitFor waits for the next event of type typ after the last event a
// WaitFor or Expect returned, and returns it; events of other types in
// between are passed over (they stay in Events). It fails the test with
// the transcript if the recording ends (the handle was closed) or no such
// event comes within 15 s.
func (r *Recorder) WaitFor(t testing.TB, typ events.Type) events.Event {
	t.Helper()
	ev, err := r.waitFor(typ, time.Now().Add(waitDeadline))
	if err != nil {
		r.fail(t, "WaitFor(%s): %v", typ, err)
	}
	return ev
}

// Expect waits for the events of types, in this order, each after the one
// before (other events may come in between), as successive WaitFor calls
// do, each with its own 15 s. It fails the test with the transcript at the
// first type that does not come, saying which ones did.
func (r *Recorder) Expect(t testing.TB, types ...events.Type) {
	t.Helper()
	for i, typ := range types {
		if _, err := r.waitFor(typ, time.Now().Add(waitDeadline)); err != nil {
			r.fail(t, "Expect(%s): %s after %s: %v", typeList(types), typ, typeList(types[:i]), err)
			return
		}
	}
}

func (r *Recorder) waitFor(typ events.Type, deadline time.Time) (events.Event, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		r.mu.Lock()
		for i := r.next; i < len(r.evs); i++ {
			if r.evs[i].Type == typ {
				r.next = i + 1
				ev := r.evs[i]
				r.mu.Unlock()
				return ev, nil
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-r.done:
			// The last events may have landed just before done closed.
			r.mu.Lock()
			more := r.changed != changed
			r.mu.Unlock()
			if !more {
				return events.Event{}, fmt.Errorf("recording ended (the handle closed its subscriptions)")
			}
		case <-timer.C:
			return events.Event{}, fmt.Errorf("none within %s", waitDeadline)
		}
	}
}

func (r *Recorder) fail(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), r.Transcript())
}

// Transcript is the recording so far, one line per event: the time since
// Record, the type, the state after it, the node and the error, if any;
// a mark shows how far WaitFor and Expect have read. WaitFor and Expect
// print it when they fail; a test can log it too.
func (r *Recorder) Transcript() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "recorded %d events:", len(r.evs))
	for i, ev := range r.evs {
		mark := "  "
		if i == r.next-1 {
			mark = "> "
		}
		line := fmt.Sprintf("%s%10s %-18s %-9s", mark, since(r.start, ev.Time), ev.Type, ev.State)
		if ev.Node != "" {
			line += " node=" + ev.Node
		}
		if ev.Err != nil {
			line += fmt.Sprintf(" err=%v", ev.Err)
		}
		if ev.Type == events.Overflow {
			line += fmt.Sprintf(" missed=%d", ev.Missed)
		}
		b.WriteString("\n" + strings.TrimRight(line, " "))
	}
	return b.String()
}

func since(start, at time.Time) string {
	if at.IsZero() {
		return "?"
	}
	return "+" + at.Sub(start).Round(time.Microsecond).String()
}

func typeList(types []events.Type) string {
	s := make([]string, len(types))
	for i, t := range types {
		s[i] = t.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
