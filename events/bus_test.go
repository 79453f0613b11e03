package events

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func recv(t *testing.T, s *Subscription) Event {
	t.Helper()
	select {
	case ev, ok := <-s.C:
		if !ok {
			t.Fatal("subscription closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return Event{}
}

func TestPublishNeverBlocksAndKeepsOrder(t *testing.T) {
	b := NewBus()
	s := b.Subscribe() // unbounded, read only later
	const n = 10000
	for i := 1; i <= n; i++ {
		b.Publish(Event{Type: Start, Term: uint64(i)})
	}
	for i := 1; i <= n; i++ {
		if ev := recv(t, s); ev.Term != uint64(i) {
			t.Fatalf("event %d has term %d", i, ev.Term)
		}
	}
	s.Close()
	b.Close()
}

func TestBoundedSubscriberGetsOverflowWithCount(t *testing.T) {
	b := NewBus()
	s := b.Subscribe(WithBuffer(4))
	for i := 1; i <= 10; i++ {
		b.Publish(Event{Type: Start, Term: uint64(i)})
	}
	// The pump may already hold the oldest event when the queue overflows;
	// what counts: every event is either received or counted as missed,
	// and the stream ends on the newest.
	var received, missed uint64
	for {
		ev := recv(t, s)
		if ev.Type == Overflow {
			missed += ev.Missed
			continue
		}
		received++
		if ev.Term == 10 {
			break
		}
	}
	if received+missed != 10 || missed == 0 {
		t.Fatalf("received %d + missed %d, want 10 with some missed", received, missed)
	}
	s.Close()
	b.Close()
}

func TestCloseDeliversQueuedThenCloses(t *testing.T) {
	b := NewBus()
	s := b.Subscribe()
	b.Publish(Event{Type: Start})
	b.Publish(Event{Type: StopComplete})
	b.Close()
	if recv(t, s).Type != Start || recv(t, s).Type != StopComplete {
		t.Fatal("queued events lost at close")
	}
	if _, ok := <-s.C; ok {
		t.Fatal("C not closed after the bus closed")
	}
	late := b.Subscribe()
	if _, ok := <-late.C; ok {
		t.Fatal("subscription after close must be closed")
	}
	s.Close()
	late.Close()
}

func TestSubscriptionCloseWithoutReading(t *testing.T) {
	b := NewBus()
	s := b.Subscribe()
	b.Publish(Event{Type: Start})
	s.Close()
	s.Close()
	b.Publish(Event{Type: Start}) // no longer delivered, never blocks
	b.Close()
}

func TestTypeNames(t *testing.T) {
	for typ := Start; typ <= RevokeRequested; typ++ {
		if s := typ.String(); s == "" || s[0] == 'T' {
			t.Errorf("type %d has no name", int(typ))
		}
	}
}

func TestPhaseNames(t *testing.T) {
	want := map[Phase]string{PhaseNone: "none", PhaseBegin: "begin", PhaseGranted: "granted", PhaseFailed: "failed", PhaseEnded: "ended", PhaseEnded + 1: "Phase(5)"}
	for p, name := range want {
		if got := p.String(); got != name {
			t.Errorf("Phase(%d) = %q, want %q", uint8(p), got, name)
		}
	}
}

// A subscription made after the START event gets it first, once, then
// what is published from then on.
func TestLateSubscriberGetsStartFirst(t *testing.T) {
	b := NewBus()
	b.Publish(Event{Type: Start, Instance: "a"})
	b.Publish(Event{Type: OfferStart})
	b.Publish(Event{Type: Start, Instance: "b"}) // not the first START: not kept
	sub := b.Subscribe()
	b.Publish(Event{Type: Lost})
	b.Close()
	var got []string
	for ev := range sub.C {
		got = append(got, ev.Type.String()+ev.Instance)
	}
	if want := []string{"STARTa", "LOST"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}
