package lock_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A nil Option (a conditional option left unset) is ignored: New neither
// panics nor skips the options after it.
func TestNilOptionIsIgnored(t *testing.T) {
	sim := testkit.NewSim()
	c := sim.Connect()
	defer c.Close()
	l, err := lock.New(c, "/x", nil)
	if err != nil {
		t.Fatalf("New with a nil Option = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.New(c, "/x", nil, lock.WithCloseTimeout(0)); !errors.Is(err, lock.ErrInvalidOption) {
		t.Fatalf("an option after a nil one: New = %v, want ErrInvalidOption", err)
	}
}

// Each of the lock's sentinels matches the one every recipe shares.
func TestErrorsMatchTheShared(t *testing.T) {
	for _, c := range []struct{ err, shared error }{
		{lock.ErrClosed, zkrecipes.ErrClosed},
		{lock.ErrSessionLost, zkrecipes.ErrSessionLost},
		{lock.ErrSuspended, zkrecipes.ErrSuspended},
		{lock.ErrNodeDeleted, zkrecipes.ErrNodeDeleted},
		{lock.ErrInvalidOption, zkrecipes.ErrInvalidOption},
		{lock.ErrCleanupPending, zkrecipes.ErrCleanupPending},
	} {
		if !errors.Is(c.err, c.shared) {
			t.Errorf("%v does not match %v", c.err, c.shared)
		}
	}
}
