package testkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestReadmeShowsTheUserExamples keeps the README's testkit examples the
// same as the runnable ones in example_user_test.go: each Example function
// there, and the code under test it calls, appears in the README verbatim.
func TestReadmeShowsTheUserExamples(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_user_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_user_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	examples := 0
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if strings.HasPrefix(fn.Name.Name, "Example") {
			examples++
		}
		start := fn.Pos()
		if fn.Doc != nil {
			start = fn.Doc.Pos()
		}
		body := string(src[fset.Position(start).Offset:fset.Position(fn.End()).Offset])
		if !strings.Contains(string(readme), body) {
			t.Errorf("README.md does not show %s from testkit/example_user_test.go verbatim:\n%s", fn.Name.Name, body)
		}
	}
	if examples != 3 {
		t.Errorf("%d Example functions in example_user_test.go, want the 3 the README shows", examples)
	}
}
