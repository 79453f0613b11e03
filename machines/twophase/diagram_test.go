package twophase

import (
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// The machines' diagrams (docs/diagrams is generated from the
// participant's) change only with a look at their golden files.
func TestDiagrams(t *testing.T) {
	golden.Check(t, "diagram_participant", Diagram())
	m, err := newCoordMachine(coordConfig{Root: "/d"})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diagram_coordinator", m.fsm.Mermaid())
}

// Every declared transition is made by some transcript: one never made is
// dead, or a transcript is missing.
func TestEveryTransitionReached(t *testing.T) {
	for _, tc := range []func(*testing.T){
		TestTranscriptVotedYesAndCommitted, TestTranscriptNoVoteDecidesAbort, TestTranscriptNoVoteAfterADecision,
		TestTranscriptCoordinatorGone, TestTranscriptRestartFindsVote, TestTranscriptConnectionLostDuringVote,
		TestTranscriptSessionLostAndClose, TestTranscriptStaleListingAfterDelete, TestTranscriptCloseWhileRegistering,
		TestTranscriptCloseWhileDisconnected, TestTranscriptSessionLostWhileIdle,
		TestTranscriptCoordinatorCommits, TestTranscriptCoordinatorWatchesEndThenTimesOut, TestTranscriptCoordinatorReadsTheDecision,
		TestTranscriptCoordinatorAbandoned, TestTranscriptCoordinatorJanitor, TestTranscriptCoordinatorClose,
		TestTranscriptCoordinatorHandOver, TestTranscriptCoordinatorCloseWhileCreating,
	} {
		tc(t)
	}
	for name, declared := range map[string][]runtime.Transition{"participant": transitions, "coordinator": coordTransitions} {
		var missing []string
		for _, tr := range declared {
			for _, from := range tr.From {
				if !reached[name][[2]events.State{from, tr.To}] {
					missing = append(missing, string(tr.Trigger)+": "+string(from)+" -> "+string(tr.To))
				}
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			t.Errorf("%s: no transcript makes %q", name, missing)
		}
	}
}
