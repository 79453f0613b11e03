package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestMailboxFIFOAndClose(t *testing.T) {
	var b Mailbox[int]
	for i := 0; i < 100; i++ {
		b.Put(i)
	}
	<-b.Ready()
	got := b.Take()
	for i, v := range got {
		if v != i {
			t.Fatalf("item %d = %d", i, v)
		}
	}
	b.Close()
	if b.Put(1) {
		t.Fatal("Put after Close succeeded")
	}
}

func TestActorHandlesInOrderAndStopsCleanly(t *testing.T) {
	var seen []int
	a := Spawn(func(ctx context.Context, m int) bool {
		seen = append(seen, m)
		return m != 3
	})
	for i := 1; i <= 5; i++ {
		a.Post(i)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("actor did not stop")
	}
	if len(seen) != 3 || seen[2] != 3 {
		t.Fatalf("handled %v, want [1 2 3]", seen)
	}
	if a.Post(9) {
		t.Fatal("Post after stop succeeded")
	}
}

func TestGoPostsResultAndStopCancelsInFlight(t *testing.T) {
	results := make(chan string, 2)
	var a *Actor[string]
	a = Spawn(func(ctx context.Context, m string) bool {
		switch m {
		case "start":
			a.Go(func(ctx context.Context) string { return "quick" })
			a.Go(func(ctx context.Context) string {
				<-ctx.Done() // a request that never answers
				return "cancelled"
			})
		default:
			results <- m
		}
		return true
	})
	a.Post("start")
	if got := <-results; got != "quick" {
		t.Fatalf("got %q", got)
	}
	a.Kill()
	select {
	case <-a.Done(): // Done waits for the blocked request's goroutine too
	case <-time.After(5 * time.Second):
		t.Fatal("Kill did not end the in-flight call")
	}
}

func TestFSMRejectsUnknownStatesAndNeverWedges(t *testing.T) {
	states := []events.State{events.StateStart, events.StateOffer}
	if _, err := NewFSM(states, "NOPE", nil); err == nil {
		t.Fatal("unknown initial state accepted")
	}
	if _, err := NewFSM(append(states, events.StateStart), events.StateStart, nil); err == nil {
		t.Fatal("a state declared twice accepted")
	}
	if _, err := NewFSM(states, events.StateStart, []Transition{{Trigger: "go", From: []events.State{events.StateStart}, To: events.StateLeader}}); err == nil {
		t.Fatal("a state the machine did not declare accepted")
	}
	// A machine of its own states: a queue's, say.
	if _, err := NewFSM([]events.State{"IDLE", "TAKING"}, "IDLE", []Transition{{Trigger: "take", From: []events.State{"IDLE"}, To: "TAKING"}}); err != nil {
		t.Fatalf("a machine's own states refused: %v", err)
	}
	if _, err := NewFSM(states, events.StateStart, []Transition{{Trigger: "go", From: []events.State{"STRAT"}, To: events.StateOffer}}); err == nil {
		t.Fatal("misspelled source state accepted")
	}
	m, err := NewFSM(states, events.StateStart, []Transition{
		{Trigger: "offer", From: []events.State{events.StateStart}, To: events.StateOffer},
		{Trigger: "stay", From: []events.State{events.StateOffer}, To: events.StateOffer},
		{Trigger: "back", From: []events.State{events.StateOffer}, To: events.StateStart},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Fire("back"); err == nil {
		t.Fatal("invalid transition accepted")
	}
	if err := m.Fire("offer"); err != nil {
		t.Fatal(err)
	}
	if err := m.Fire("stay"); err != nil {
		t.Fatalf("self-transition reported as error: %v", err)
	}
	if err := m.Fire("back"); err != nil || m.Current() != events.StateStart {
		t.Fatalf("state %s err %v", m.Current(), err)
	}
	if err := m.Fire("unknown"); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("unknown trigger: %v", err)
	}
	if !m.Can("offer") || m.Can("back") {
		t.Fatal("Can is wrong")
	}
}
