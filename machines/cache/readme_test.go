package cache_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/golden"
)

// The README's cache section shows ExampleNewTree, as it runs, verbatim.
func TestReadmeShowsTheExample(t *testing.T) {
	golden.ReadmeShows(t, "../../README.md", "example_test.go", "ExampleNewTree")
}
