package contention

import "testing"

// Diagram draws the machine NewMachine builds.
func TestDiagramIsTheMachines(t *testing.T) {
	m, err := NewMachine(Config{Dir: "/d", Markers: []string{"lock-"}, Errors: testErrors, NewID: func() string { return "x" }})
	if err != nil {
		t.Fatal(err)
	}
	if d := Diagram(); d != m.FSM().Mermaid() {
		t.Errorf("Diagram differs from the machine's:\n%s\n---\n%s", d, m.FSM().Mermaid())
	}
}
