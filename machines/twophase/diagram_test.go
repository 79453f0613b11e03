package twophase

import (
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
func TestEveryTransitionInATranscript(t *testing.T) {
	golden.EveryTransitionInATranscript(t, map[string][]runtime.Transition{"participant": transitions, "coordinator": coordTransitions},
		func(name string, from events.State, tr runtime.Transition) bool {
			return reached[name][[2]events.State{from, tr.To}]
		},
		TestTranscriptVotedYesAndCommitted, TestTranscriptNoVoteDecidesAbort, TestTranscriptNoVoteAfterADecision,
		TestTranscriptCoordinatorGone, TestTranscriptRestartFindsVote, TestTranscriptConnectionLostDuringVote,
		TestTranscriptSessionLostAndClose, TestTranscriptListingBeforeOurDelete, TestTranscriptCloseWhileRegistering,
		TestTranscriptCloseWhileDisconnected, TestTranscriptSessionLostWhileIdle, TestTranscriptCoordinatorCommits,
		TestTranscriptCoordinatorWatchesEndThenTimesOut, TestTranscriptCoordinatorReadsTheDecision,
		TestTranscriptCoordinatorAbandoned, TestTranscriptCoordinatorJanitor, TestTranscriptCoordinatorClose,
		TestTranscriptCoordinatorHandOver, TestTranscriptCoordinatorCloseWhileCreating)
}
