package twophase

import "testing"

// Diagram draws the machine newMachine builds.
func TestDiagramIsTheMachines(t *testing.T) {
	m, err := newMachine(config{Root: "/d", ID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if d := Diagram(); d != m.Mermaid() {
		t.Errorf("Diagram differs from the machine's:\n%s\n---\n%s", d, m.Mermaid())
	}
}
