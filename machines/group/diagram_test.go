package group

import (
	"fmt"
	"os"
	"strings"
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

func track(f *trackedFSM) {
	f.fired = func(from events.State, t runtime.Trigger) {
		if seen != nil {
			seen[fmt.Sprintf("%s %s", from, t)] = true
		}
	}
}

// Every transition the diagram declares is made by some transcript.
func TestEveryTransitionInATranscript(t *testing.T) {
	transcripts := []func(*testing.T){
		TestTranscriptJoinSetLeave, TestTranscriptLostCreateReply, TestTranscriptDisconnect, TestTranscriptExpiry,
		TestTranscriptTaken, TestTranscriptLeaveRefused, TestTranscriptJoinRefused, TestTranscriptClose,
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
	for _, tr := range transitions {
		for _, from := range tr.From {
			if k := fmt.Sprintf("%s %s", from, tr.Trigger); !seen[k] {
				missing = append(missing, k+" -> "+string(tr.To))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("transitions no transcript makes:\n%s", strings.Join(missing, "\n"))
	}
}
