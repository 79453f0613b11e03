package grpcresolver_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/golden"
)

// docs/examples.md (linked from the README's gRPC subsection) shows ExampleNewBuilder, as it runs,
// verbatim.
func TestReadmeShowsTheExample(t *testing.T) {
	golden.ReadmeShows(t, "../../docs/examples.md", "example_test.go", "ExampleNewBuilder")
}
