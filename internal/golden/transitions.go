package golden

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// EveryTransitionInATranscript runs a machine package's transcript tests
// as subtests of t, then fails t for each declared transition they did not
// make: one never made is dead, or a transcript is missing. transcripts
// are every TestTranscript func of the package's test files (one left out
// of the list fails t); machines are the declared transitions, by machine
// name; made says, after the run, whether the transcripts made tr of
// machine from the state from.
func EveryTransitionInATranscript(t *testing.T, machines map[string][]runtime.Transition,
	made func(machine string, from events.State, tr runtime.Transition) bool, transcripts ...func(*testing.T)) {
	t.Helper()
	names := make([]string, len(transcripts))
	pkg := ""
	for i, f := range transcripts {
		full := goruntime.FuncForPC(reflect.ValueOf(f).Pointer()).Name() // <import path>.<func>
		pkg, names[i] = filepath.Base(full[:strings.LastIndex(full, ".")]), full[strings.LastIndex(full, ".")+1:]
	}
	if unlisted := transcriptsIn(t, pkg, names); len(unlisted) > 0 {
		t.Fatalf("transcript tests not in the list: %s", strings.Join(unlisted, ", "))
	}
	for i, f := range transcripts {
		t.Run(names[i], f)
	}
	var missing []string
	for name, declared := range machines {
		for _, tr := range declared {
			for _, from := range tr.From {
				if !made(name, from, tr) {
					missing = append(missing, strings.TrimSpace(fmt.Sprintf("%s %s -%s-> %s", name, from, tr.Trigger, tr.To)))
				}
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("transitions no transcript makes:\n%s", strings.Join(missing, "\n"))
	}
}

// transcriptsIn returns the TestTranscript funcs of package pkg's test
// files in the current directory that are not among listed.
func transcriptsIn(t *testing.T, pkg string, listed []string) []string {
	t.Helper()
	if pkg == "" {
		t.Fatal("no transcripts")
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var unlisted []string
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != pkg {
			continue // the package's external tests
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "TestTranscript") &&
				!slices.Contains(listed, fn.Name.Name) {
				unlisted = append(unlisted, fn.Name.Name)
			}
		}
	}
	return unlisted
}
