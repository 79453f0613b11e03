package golden

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// ReadmeShows fails t unless the README at readme shows each named function
// of the Go file src verbatim, doc comment included: the README's snippets
// are examples that run.
func ReadmeShows(t testing.TB, readme, src string, funcs ...string) {
	t.Helper()
	text, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, src, code, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok {
			start := fn.Pos()
			if fn.Doc != nil {
				start = fn.Doc.Pos()
			}
			bodies[fn.Name.Name] = string(code[fset.Position(start).Offset:fset.Position(fn.End()).Offset])
		}
	}
	for _, name := range funcs {
		body, ok := bodies[name]
		switch {
		case !ok:
			t.Errorf("%s has no func %s", src, name)
		case !strings.Contains(string(text), body):
			t.Errorf("%s does not show %s from %s verbatim:\n%s", readme, name, src, body)
		}
	}
}
