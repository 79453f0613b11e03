package semaphore_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/apicheck"
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
