package discovery_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/golden"
)

// The README's service discovery section shows ExampleRegister, as it
// runs, verbatim.
func TestReadmeShowsTheExample(t *testing.T) {
	golden.ReadmeShows(t, "../../README.md", "example_test.go", "ExampleRegister")
}
