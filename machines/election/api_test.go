package election_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/apicheck"
)

// The engine the package is built on stays out of its public API: no
// exported name, signature or doc mentions it.
func TestAPIKeepsTheEngineOut(t *testing.T) {
	found, err := apicheck.Mentions(".", "contention")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("the public API mentions the contention package: %s", f)
	}
}
