package barrier

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// The machines' diagrams are as reviewed in testdata.
func TestDiagrams(t *testing.T) {
	golden.Check(t, "diagram_double", Diagram())
	golden.Check(t, "diagram_barrier", newBarrierMachine().fsm.Mermaid())
}

// seen collects the transitions the transcripts make, while
// TestEveryTransitionInATranscript runs them: "<machine> <from> <trigger>".
var seen map[string]bool

// track has fsm of machine name report its transitions to seen.
func track(f *runtime.FSM, name string) {
	f.Fired = func(from events.State, t runtime.Trigger) {
		if seen != nil {
			seen[fmt.Sprintf("%s %s %s", name, from, t)] = true
		}
	}
}

// Every transition a diagram declares is made by some transcript.
func TestEveryTransitionInATranscript(t *testing.T) {
	seen = make(map[string]bool)
	defer func() { seen = nil }()
	golden.EveryTransitionInATranscript(t, map[string][]runtime.Transition{"double": transitions, "barrier": barrierTransitions},
		func(name string, from events.State, tr runtime.Transition) bool {
			return seen[fmt.Sprintf("%s %s %s", name, from, tr.Trigger)]
		},
		TestTranscriptLastArrivalAndExit, TestTranscriptStaleReadyAndNextRound, TestTranscriptSessionLostWhileEntering,
		TestTranscriptJoinAfterSessionLost, TestTranscriptCountFullAndMismatch, TestTranscriptReadyBeforeOurJoinReply,
		TestTranscriptRoundInProgress, TestTranscriptNodeGoneBeforeLeave, TestTranscriptLeaveListingBehindReady,
		TestTranscriptReadyInTheWayWent, TestTranscriptRefusedEnterGetsOut, TestTranscriptBarrierCalls,
		TestTranscriptBarrierWaitThroughFaults, TestTranscriptBarrierClose, TestTranscriptSessionLostInside,
		TestTranscriptCloseInEveryState, TestTranscriptWithdrawnEnterGetsOut, TestTranscriptEnterWithdrawnDuringItsCreate)
}
