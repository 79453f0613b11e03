package twophase

import "testing"

// Diagram draws the machine NewMachine builds.
func TestDiagramIsTheMachines(t *testing.T) {
	m, err := NewMachine(Config{Root: "/d", ID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if d := Diagram(); d != m.Mermaid() {
		t.Errorf("Diagram differs from the machine's:\n%s\n---\n%s", d, m.Mermaid())
	}
}
