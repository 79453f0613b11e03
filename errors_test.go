package zkrecipes_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes"
)

// The shared sentinels are distinct: a caller's switch over them can tell
// each apart.
func TestSentinelsAreDistinct(t *testing.T) {
	all := []error{zkrecipes.ErrClosed, zkrecipes.ErrSessionLost, zkrecipes.ErrSuspended,
		zkrecipes.ErrNodeDeleted, zkrecipes.ErrInvalidPath, zkrecipes.ErrInvalidOption, zkrecipes.ErrCleanupPending}
	for i, a := range all {
		for j, b := range all {
			if (i == j) != errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, errors.Is(a, b))
			}
		}
	}
}
