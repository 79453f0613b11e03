// Package apicheck finds what a package's public API says about other
// packages: the tests of the recipe packages use it to keep the engine
// they are built on out of their API.
package apicheck

import (
	"bytes"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"strings"
)

// Mentions returns every exported declaration (with its doc comment) of
// the package in dir, and the package doc, that contains word.
func Mentions(dir, word string) ([]string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, p := range pkgs {
		d := doc.New(p, "", 0)
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
	}
	return found, nil
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
