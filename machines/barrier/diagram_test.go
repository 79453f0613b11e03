package barrier

import (
	"fmt"
	"os"
	"strings"
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
func track(f *trackedFSM, name string) {
	f.fired = func(from events.State, t runtime.Trigger) {
		if seen != nil {
			seen[fmt.Sprintf("%s %s %s", name, from, t)] = true
		}
	}
}

// Every transition a diagram declares is made by some transcript.
func TestEveryTransitionInATranscript(t *testing.T) {
	transcripts := []func(*testing.T){
		TestTranscriptLastArrivalAndExit, TestTranscriptStaleReadyAndNextRound, TestTranscriptSessionLostWhileEntering,
		TestTranscriptJoinAfterSessionLost, TestTranscriptCountFullAndMismatch, TestTranscriptReadyBeforeOurJoinReply,
		TestTranscriptRoundInProgress, TestTranscriptNodeGoneBeforeLeave, TestTranscriptLeaveListingBehindReady,
		TestTranscriptReadyInTheWayWent, TestTranscriptRefusedEnterGetsOut, TestTranscriptBarrierCalls,
		TestTranscriptBarrierWaitThroughFaults, TestTranscriptBarrierClose, TestTranscriptSessionLostInside,
		TestTranscriptCloseInEveryState,
	}
	src, err := os.ReadFile("machine_test.go")
	if n := strings.Count(string(src), "\nfunc TestTranscript"); err != nil || n != len(transcripts) {
		t.Fatalf("machine_test.go has %d transcript tests, this list %d (%v)", n, len(transcripts), err)
	}
	seen = make(map[string]bool)
	defer func() { seen = nil }()
	for i, f := range transcripts {
		t.Run(fmt.Sprint(i), f)
	}
	var missing []string
	for name, ts := range map[string][]runtime.Transition{"double": transitions, "barrier": barrierTransitions} {
		for _, tr := range ts {
			for _, from := range tr.From {
				if k := fmt.Sprintf("%s %s %s", name, from, tr.Trigger); !seen[k] {
					missing = append(missing, k+" -> "+string(tr.To))
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("transitions no transcript makes:\n%s", strings.Join(missing, "\n"))
	}
}
