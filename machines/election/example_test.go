package election_test

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Two participants on the simulator: the first leads, resigns, and the
// second, watching only the node before its own, takes over.
func Example() {
	sim := testkit.NewSim()
	defer sim.Close()
	ctx := context.Background()

	a, _ := election.New(sim.Connect(), "/app/election", election.WithID("node-a"))
	b, _ := election.New(sim.Connect(), "/app/election", election.WithID("node-b"))
	defer a.Close()
	defer b.Close()

	changes := b.Observe(ctx)
	fmt.Println("leader:", describe(<-changes))

	term, err := a.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("a leads:", a.State())
	fmt.Println("leader:", describe(<-changes))

	queued := b.Subscribe()
	defer queued.Close()
	next := make(chan *election.Term)
	go func() {
		t, _ := b.Campaign(ctx)
		next <- t
	}()
	for ev := range queued.C { // b waits behind a, watching a's node
		if ev.Type == events.ReadyStart {
			break
		}
	}
	if err := a.Resign(ctx); err != nil {
		fmt.Println(err)
		return
	}
	<-term.Lost()
	bTerm := <-next
	fmt.Println("b leads:", b.State(), "with a higher token:", bTerm.Token() > term.Token())
	fmt.Println("leader:", describe(<-changes))
	// Output:
	// leader: none
	// a leads: LEADER
	// leader: node-a
	// b leads: LEADER with a higher token: true
	// leader: node-b
}

func describe(l election.Leader) string {
	if l.Vacant() {
		return "none"
	}
	return l.ID
}
