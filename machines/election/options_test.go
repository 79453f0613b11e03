package election_test

import (
	"errors"
	"testing"

	zkrecipes "github.com/zkrecipes/zkrecipes"

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

// Each sentinel of the election matches the root package's of the same
// meaning.
func TestSentinelsMatchTheRoot(t *testing.T) {
	for _, tc := range []struct{ ours, root error }{
		{election.ErrClosed, zkrecipes.ErrClosed},
		{election.ErrSessionLost, zkrecipes.ErrSessionLost},
		{election.ErrSuspended, zkrecipes.ErrSuspended},
		{election.ErrNodeDeleted, zkrecipes.ErrNodeDeleted},
		{election.ErrInvalidOption, zkrecipes.ErrInvalidOption},
		{election.ErrCleanupPending, zkrecipes.ErrCleanupPending},
	} {
		if !errors.Is(tc.ours, tc.root) {
			t.Errorf("errors.Is(%v, zkrecipes %v) = false", tc.ours, tc.root)
		}
	}
}
