package queue

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

func TestDiagram(t *testing.T) { golden.Check(t, "diagram", Diagram()) }

// fired are the transitions the transcripts' machines fired ("FROM trigger"),
// recorded by firing (newTranscript).
var fired = map[string]bool{}

// firing records the transitions of the FSM it wraps in fired.
type firing struct{ *runtime.FSM }

func (f firing) Fire(t runtime.Trigger) error {
	fired[fmt.Sprintf("%s %s", f.Current(), t)] = true
	return f.FSM.Fire(t)
}

// Every declared transition is fired by some transcript. Parallel, it runs
// once the other tests, the transcripts among them, are done.
func TestTranscriptsFireEveryTransition(t *testing.T) {
	t.Parallel()
	var missing []string
	for _, tr := range transitions {
		for _, from := range tr.From {
			if !fired[fmt.Sprintf("%s %s", from, tr.Trigger)] {
				missing = append(missing, fmt.Sprintf("%s -%s-> %s", from, tr.Trigger, tr.To))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("no transcript fires %v (run with the TestTranscript tests)", missing)
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
