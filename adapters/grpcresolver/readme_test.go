package grpcresolver_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/golden"
)

// The README's gRPC subsection shows ExampleNewBuilder, as it runs,
// verbatim.
func TestReadmeShowsTheExample(t *testing.T) {
	golden.ReadmeShows(t, "../../README.md", "example_test.go", "ExampleNewBuilder")
}
