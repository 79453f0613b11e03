package queue

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

func TestDiagram(t *testing.T) { golden.Check(t, "diagram", Diagram()) }

// fired are the transitions the transcripts' machines fired ("FROM trigger"),
// recorded by record (newTranscript).
var fired = map[string]bool{}

// record records the transitions f fires in fired.
func record(f *runtime.FSM) {
	f.Fired = func(from events.State, t runtime.Trigger) { fired[fmt.Sprintf("%s %s", from, t)] = true }
}

// Every declared transition is fired by some transcript.
func TestEveryTransitionInATranscript(t *testing.T) {
	golden.EveryTransitionInATranscript(t, map[string][]runtime.Transition{"": transitions},
		func(_ string, from events.State, tr runtime.Transition) bool {
			return fired[fmt.Sprintf("%s %s", from, tr.Trigger)]
		},
		TestTranscriptTakeReadsAhead, TestTranscriptClaimLost, TestTranscriptRedelivery,
		TestTranscriptPriorityArrivesDuringTake, TestTranscriptClaimReplyBetweenSessions, TestTranscriptQueueNodeRecreated, TestTranscriptReadOfAnOldItemOfTheSameName,
		TestTranscriptAckClaimsNextInOneMulti, TestTranscriptJointClaimLostToAnother,
		TestTranscriptNoJointClaimWhileClosing, TestTranscriptStaleCheckDuringANewClaim,
		TestTranscriptNoClaimWhileItsAckIsInFlight, TestTranscriptRefusedTakePutsTheItemBack,
		TestTranscriptRefusedClaimIsGivenBack, TestTranscriptClaimWaitsForThePutBack,
		TestTranscriptAckSentAgainFindsItsFirstLanded, TestTranscriptAckCheckedOnTheNextSessionFirst,
		TestTranscriptClaimMadeOnTheNextSessionFirst, TestTranscriptSessionsLostBeforeAListing,
		TestTranscriptListingSentAgain, TestTranscriptClosedBeforeATake, TestTranscriptStaleAckFailsOnTheServer,
		TestTranscriptNackedItemTakenFirst)
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
