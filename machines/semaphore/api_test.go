package semaphore_test

import (
	"errors"
	"testing"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/apicheck"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
)

// The semaphore keeps the engine it is built on out of its public API, as
// the lock and the election do: no exported name, signature or doc
// mentions it.
func TestKeepsTheEngineOut(t *testing.T) {
	found, err := apicheck.Mentions(".", "contention")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("the public API mentions the contention package: %s", f)
	}
}

// Each sentinel of the semaphore matches the root package's of the same
// meaning.
func TestSentinelsMatchTheRoot(t *testing.T) {
	for _, tc := range []struct{ ours, root error }{
		{semaphore.ErrClosed, zkrecipes.ErrClosed},
		{semaphore.ErrSessionLost, zkrecipes.ErrSessionLost},
		{semaphore.ErrSuspended, zkrecipes.ErrSuspended},
		{semaphore.ErrNodeDeleted, zkrecipes.ErrNodeDeleted},
		{semaphore.ErrInvalidOption, zkrecipes.ErrInvalidOption},
		{semaphore.ErrCleanupPending, zkrecipes.ErrCleanupPending},
	} {
		if !errors.Is(tc.ours, tc.root) {
			t.Errorf("errors.Is(%v, zkrecipes %v) = false", tc.ours, tc.root)
		}
	}
}
