package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const dir = "../../docs/diagrams"

// docs/diagrams holds exactly what the generator writes: a change to a
// machine's states or transitions comes with its regenerated diagram.
func TestDiagramsAreCurrent(t *testing.T) {
	want := render()
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("docs/diagrams/%s: %v; run go generate ./...", name, err)
			continue
		}
		if !bytes.Equal(got, data) {
			t.Errorf("docs/diagrams/%s is stale; run go generate ./...\nwant:\n%s\ngot:\n%s", name, data, got)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok {
			t.Errorf("docs/diagrams/%s is not generated (a machine gone?); delete it and run go generate ./...", e.Name())
		}
	}
}

// The output is the same every time, and every diagram is a Mermaid
// state diagram with a start and transitions.
func TestRenderIsStable(t *testing.T) {
	first := render()
	for range 20 {
		again := render()
		for name, data := range first {
			if !bytes.Equal(again[name], data) {
				t.Fatalf("%s differs between two renders:\n%s\n---\n%s", name, data, again[name])
			}
		}
	}
	var names []string
	for _, m := range machines {
		if slices.Contains(names, m.name) {
			t.Errorf("machine %s listed twice", m.name)
		}
		names = append(names, m.name)
		d := m.diagram()
		if !strings.HasPrefix(d, "stateDiagram-v2\n    [*] --> START\n") || strings.Count(d, "-->") < 3 {
			t.Errorf("%s: not a state diagram:\n%s", m.name, d)
		}
	}
}
