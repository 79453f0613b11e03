package cache

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// The machine's diagram is as reviewed in testdata.
func TestDiagram(t *testing.T) { golden.Check(t, "diagram", Diagram()) }

// seen collects the transitions the transcripts make, while
// TestEveryTransitionInATranscript runs them: "<from> <trigger>".
var seen map[string]bool

func track(f *runtime.FSM) {
	f.Fired = func(from events.State, t runtime.Trigger) {
		if seen != nil {
			seen[fmt.Sprintf("%s %s", from, t)] = true
		}
	}
}

// Every transition the diagram declares is made by some transcript.
func TestEveryTransitionInATranscript(t *testing.T) {
	seen = make(map[string]bool)
	defer func() { seen = nil }()
	golden.EveryTransitionInATranscript(t, map[string][]runtime.Transition{"": transitions},
		func(_ string, from events.State, tr runtime.Transition) bool {
			return seen[fmt.Sprintf("%s %s", from, tr.Trigger)]
		},
		TestTranscriptFirstLoad, TestTranscriptChanges, TestTranscriptAbsentRoot, TestTranscriptDisconnect,
		TestTranscriptExpiry, TestTranscriptCrossedReplies, TestTranscriptClose)
}
