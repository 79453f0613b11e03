package group_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/golden"
)

// docs/examples.md (linked from the README's group section) shows ExampleJoin, as it runs, verbatim.
func TestReadmeShowsTheExample(t *testing.T) {
	golden.ReadmeShows(t, "../../docs/examples.md", "example_test.go", "ExampleJoin")
}
