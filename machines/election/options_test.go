package election_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A nil Option (a conditional option left unset) is ignored: New neither
// panics nor skips the options after it.
func TestNilOptionIsIgnored(t *testing.T) {
	sim := testkit.NewSim()
	c := sim.Connect()
	defer c.Close()
	e, err := election.New(c, "/x", nil, election.WithID("n1"), nil)
	if err != nil {
		t.Fatalf("New with nil Options = %v", err)
	}
	defer e.Close()
	if e.ID() != "n1" {
		t.Fatalf("ID = %q, want n1 (the option after a nil one)", e.ID())
	}
}
