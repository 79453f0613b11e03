package queue

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Diagram draws the machine NewMachine builds.
func TestDiagramIsTheMachines(t *testing.T) {
	m, err := newMachine(config{Path: "/d"})
	if err != nil {
		t.Fatal(err)
	}
	if d := Diagram(); d != m.Mermaid() {
		t.Errorf("Diagram differs from the machine's:\n%s\n---\n%s", d, m.Mermaid())
	}
}

// ZooKeeper's errors are named by runtime.ZKErrorType, the queue's by
// errorType's own table.
func TestErrorType(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", ErrEmpty): "empty", ErrClosed: "closed", zk.ErrBadVersion: "bad_version",
		zk.ErrInvalidPath: "invalid_path", zk.ErrNoNode: "no_node", fmt.Errorf("other"): "_OTHER",
	} {
		if got := errorType(err); got != want {
			t.Errorf("errorType(%v) = %q, want %q", err, got, want)
		}
	}
}
