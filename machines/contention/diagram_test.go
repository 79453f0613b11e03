package contention

import (
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
)

// The machine's diagram (docs/diagrams is generated from it) changes only
// with a look at its golden file.
func TestDiagram(t *testing.T) { golden.Check(t, "diagram", Diagram()) }

// reached collects the transitions (the state before and after a step)
// the transcripts make: see TestEveryTransitionReached.
var reached = map[[2]events.State]bool{}

// Every declared transition is made by some transcript: one never made is
// dead, or a transcript is missing.
func TestEveryTransitionReached(t *testing.T) {
	for _, tc := range []func(*testing.T){
		TestTranscriptLeasesReleaseBeforeTheWatch, TestTranscriptLeasesPromotedBeforeTheWatch, TestTranscriptUncontendedReentrant, TestTranscriptZeroReadHandoff, TestTranscriptWaiterBeforeUsGaveUp, TestTranscriptDataChangeAloneIsNoRelease, TestTranscriptHoldMarkHandoff, TestTranscriptHoldMarkSeenByTheWatchRequest, TestTranscriptHoldMarkMissing, TestTranscriptHoldMarkLateAnnounce, TestTranscriptGhostAdopted, TestTranscriptGhostNotFoundCreatesAgain, TestTranscriptCreateOnNewSessionIsNotOurs, TestTranscriptNoGrantWhileSuspended, TestTranscriptExpiryWhileWaiting, TestTranscriptSuspendedWhileHolding, TestTranscriptCancelDuringCreate, TestTranscriptCancelRacesGrant, TestTranscriptTryAcquireBehindHolder, TestTranscriptOwnDeletedNodeInALateListing, TestTranscriptShutdownWhileHolding, TestTranscriptMissingDirectory, TestTranscriptOwnReadLost, TestTranscriptCreateRefused, TestTranscriptHandoverWhileDisconnected, TestTranscriptHandoverHoldMark, TestTranscriptHandoverCreateInFlight, TestTranscriptOwnNodeDeletedWhileHeld, TestTranscriptOwnReleaseIsNotAForeignDelete, TestTranscriptOwnResignIsNotAForeignDelete, TestTranscriptOwnNodeGoneWithOurConnection, TestTranscriptDanglingMarkWatchFired, TestTranscriptReaderBehindReaders, TestTranscriptReaderWatchesEachWriterBelow, TestTranscriptWriterBehindReaders, TestTranscriptWriterBehindWriterRereads, TestTranscriptWriterBehindMarkedWriterHolds, TestTranscriptReleaseNoMark, TestTranscriptWriterListsWhenAWriterIsAmongTheRest, TestTranscriptLeases, TestTranscriptLeasesPromotion, TestTranscriptDowngrade, TestTranscriptDowngradeWriterGone, TestTranscriptReaderBehindOneWriter, TestTranscriptRevokeWhileHolding, TestTranscriptRevokeRequestedBeforeTheGrant, TestTranscriptRevokeAcrossAConnectionLoss, TestTranscriptRevokeAfterRelease,
		TestTranscriptShutdownAtStart, TestTranscriptWaiterCancelledThenLost,
	} {
		tc(t)
	}
	var missing []string
	for _, tr := range transitions {
		for _, from := range tr.From {
			if !reached[[2]events.State{from, tr.To}] {
				missing = append(missing, string(tr.Trigger)+": "+string(from)+" -> "+string(tr.To))
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("no transcript makes %q", missing)
	}
}
