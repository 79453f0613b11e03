package group_test

import (
	"os"
	"strings"
	"testing"
)

// The README's group section shows ExampleJoin, as it runs, verbatim.
func TestReadmeShowsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(src), "// Two processes join")
	if i < 0 {
		t.Fatal("example_test.go has no ExampleJoin doc")
	}
	if body := string(src[i:]); !strings.Contains(string(readme), body) {
		t.Errorf("README.md does not show ExampleJoin verbatim:\n%s", body)
	}
}
