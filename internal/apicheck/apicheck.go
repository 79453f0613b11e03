// Package apicheck reads a package's public API: the tests of the recipe
// packages use it to keep the engine they are built on, and their own
// internals, out of it.
package apicheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
)

// Mentions returns every exported declaration (with its doc comment) of
// the package in dir, and the package doc, that contains word.
func Mentions(dir, word string) ([]string, error) {
	d, fset, err := read(dir)
	if err != nil {
		return nil, err
	}
	var found []string
	check := func(text string, node ast.Node) {
		var b bytes.Buffer
		if node != nil {
			printer.Fprint(&b, fset, node)
		}
		if strings.Contains(text+b.String(), word) {
			found = append(found, strings.SplitN(b.String()+" "+text, "\n", 2)[0])
		}
	}
	check(d.Doc, nil)
	for _, f := range d.Funcs {
		check(f.Doc, f.Decl)
	}
	for _, v := range append(d.Consts, d.Vars...) {
		check(v.Doc, v.Decl)
	}
	for _, t := range d.Types {
		check(t.Doc, exportedOnly(t.Decl))
		for _, f := range append(t.Funcs, t.Methods...) {
			check(f.Doc, f.Decl)
		}
		for _, v := range append(t.Consts, t.Vars...) {
			check(v.Doc, v.Decl)
		}
	}
	return found, nil
}

// Exports returns which of names the package in dir exports at its top
// level (types, functions, variables and constants).
func Exports(dir string, names ...string) ([]string, error) {
	d, _, err := read(dir)
	if err != nil {
		return nil, err
	}
	var found []string
	add := func(name string) {
		if slices.Contains(names, name) {
			found = append(found, name)
		}
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				add(n)
			}
		}
	}
	values(append(d.Consts, d.Vars...))
	for _, f := range d.Funcs {
		add(f.Name)
	}
	for _, t := range d.Types {
		add(t.Name)
		values(append(t.Consts, t.Vars...))
		for _, f := range t.Funcs {
			add(f.Name)
		}
	}
	return found, nil
}

// read parses the package in dir, its test files left out, for its doc.
func read(dir string) (*doc.Package, *token.FileSet, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("apicheck: no Go files in %s", dir)
	}
	d, err := doc.NewFromFiles(fset, files, dir)
	return d, fset, err
}

// exportedOnly drops a struct type's unexported fields, which go doc
// does not show either.
func exportedOnly(decl *ast.GenDecl) *ast.GenDecl {
	for _, spec := range decl.Specs {
		ts, ok := spec.(*ast.TypeSpec)
		if !ok {
			continue
		}
		if st, ok := ts.Type.(*ast.StructType); ok {
			var keep []*ast.Field
			for _, f := range st.Fields.List {
				if len(f.Names) > 0 && ast.IsExported(f.Names[0].Name) {
					keep = append(keep, f)
				}
			}
			st.Fields.List = keep
		}
	}
	return decl
}
