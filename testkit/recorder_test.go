package testkit

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
)

// fakeTB records Fatalf instead of failing the test. Fatalf does not stop
// the goroutine, so the Recorder's methods must return after it.
type fakeTB struct {
	testing.TB
	fatal string
}

func (*fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }

func publish(bus *events.Bus, types ...events.Type) {
	for _, typ := range types {
		bus.Publish(events.Event{Time: time.Now(), Type: typ, State: events.StateLeader, Node: "/l/n1"})
	}
}

func TestRecorderWaitFor(t *testing.T) {
	bus := events.NewBus()
	defer bus.Close()
	rec := Record(t, bus)
	publish(bus, events.OfferStart, events.ElectedComplete, events.Lost, events.ElectedComplete)

	if ev := rec.WaitFor(t, events.ElectedComplete); ev.Type != events.ElectedComplete || ev.Node != "/l/n1" {
		t.Fatalf("WaitFor returned %v", ev)
	}
	rec.WaitFor(t, events.Lost)
	rec.WaitFor(t, events.ElectedComplete) // the second one, after the Lost
	go publish(bus, events.StopComplete)   // one that comes while waiting
	rec.WaitFor(t, events.StopComplete)
	if got := len(rec.Events()); got != 5 {
		t.Fatalf("Events: %d, want 5", got)
	}
}

func TestRecorderExpect(t *testing.T) {
	bus := events.NewBus()
	defer bus.Close()
	rec := Record(t, bus)
	go publish(bus, events.Start, events.OfferStart, events.Suspended, events.ElectedComplete, events.Lost)
	rec.Expect(t, events.OfferStart, events.ElectedComplete, events.Lost)
}

func TestRecorderRecordsFromTheCall(t *testing.T) {
	bus := events.NewBus()
	defer bus.Close()
	publish(bus, events.Start, events.OfferStart)
	rec := Record(t, bus)
	publish(bus, events.ReadyStart)
	rec.WaitFor(t, events.ReadyStart)
	if evs := rec.Events(); len(evs) != 2 || evs[0].Type != events.Start || evs[1].Type != events.ReadyStart {
		t.Fatalf("Events: %v, want the handle's START, then what came after Record", evs)
	}
}

// A failure prints the transcript: what was recorded, with the error.
func TestRecorderFailurePrintsTranscript(t *testing.T) {
	bus := events.NewBus()
	rec := Record(t, bus)
	bus.Publish(events.Event{Time: time.Now(), Type: events.ElectedComplete, State: events.StateLeader, Node: "/app/lock/_c_x-lock-0000000001"})
	bus.Publish(events.Event{Time: time.Now(), Type: events.Lost, State: events.StateFailed, Err: errors.New("session lost")})
	rec.WaitFor(t, events.ElectedComplete)
	bus.Close() // the handle closed: the recording ends, WaitFor fails at once

	ft := &fakeTB{}
	rec.Expect(ft, events.Lost, events.StopComplete)
	for _, want := range []string{
		"Expect([LOST STOP_COMPLETE]): STOP_COMPLETE after [LOST]: recording ended",
		"recorded 2 events:",
		"ELECTED_COMPLETE   LEADER    node=/app/lock/_c_x-lock-0000000001",
		"> ",
		"LOST               FAILED    err=session lost",
	} {
		if !strings.Contains(ft.fatal, want) {
			t.Errorf("the failure does not say %q:\n%s", want, ft.fatal)
		}
	}
	if lines := strings.Split(ft.fatal, "\n"); len(lines) != 4 || !strings.HasPrefix(strings.TrimSpace(lines[2]), "+") || !strings.HasPrefix(lines[3], "> ") {
		t.Errorf("the transcript is not one line per event, time first, a mark at the last read:\n%s", ft.fatal)
	}
}

func TestRecorderWaitForTimesOut(t *testing.T) {
	defer func(d time.Duration) { waitDeadline = d }(waitDeadline)
	waitDeadline = 50 * time.Millisecond
	bus := events.NewBus()
	defer bus.Close()
	rec := Record(t, bus)
	publish(bus, events.OfferStart)

	ft := &fakeTB{}
	if ev := rec.WaitFor(ft, events.Lost); ev.Type != 0 {
		t.Fatalf("a failed WaitFor returned %v", ev)
	}
	if !strings.Contains(ft.fatal, "WaitFor(LOST): none within 50ms") || !strings.Contains(ft.fatal, "OFFER_START") {
		t.Fatalf("the failure says:\n%s", ft.fatal)
	}
}
