package contention

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// The machine's diagram (docs/diagrams is generated from it) changes only
// with a look at its golden file.
func TestDiagram(t *testing.T) { golden.Check(t, "diagram", Diagram()) }

// reached collects the transitions (the state before and after a step)
// the transcripts make: see TestEveryTransitionInATranscript.
var reached = map[[2]events.State]bool{}

// Every declared transition is made by some transcript: one never made is
// dead, or a transcript is missing.
func TestEveryTransitionInATranscript(t *testing.T) {
	golden.EveryTransitionInATranscript(t, map[string][]runtime.Transition{"": transitions},
		func(_ string, from events.State, tr runtime.Transition) bool {
			return reached[[2]events.State{from, tr.To}]
		},
		TestTranscriptLeasesReleaseBeforeTheWatch, TestTranscriptLeasesPromotedBeforeTheWatch,
		TestTranscriptUncontendedReentrant, TestTranscriptZeroReadHandoff, TestTranscriptWaiterBeforeUsGaveUp,
		TestTranscriptDataChangeAloneIsNoRelease, TestTranscriptHoldMarkHandoff,
		TestTranscriptHoldMarkSeenByTheWatchRequest, TestTranscriptHoldMarkMissing, TestTranscriptHoldMarkLateAnnounce,
		TestTranscriptGhostAdopted, TestTranscriptGhostNotFoundCreatesAgain, TestTranscriptCreateOnNewSessionIsNotOurs,
		TestTranscriptNoGrantWhileSuspended, TestTranscriptExpiryWhileWaiting, TestTranscriptSuspendedWhileHolding,
		TestTranscriptCancelDuringCreate, TestTranscriptCancelRacesGrant, TestTranscriptTryAcquireBehindHolder,
		TestTranscriptOwnNodeInAListingWhileItsDeleteIsSentAgain, TestTranscriptShutdownWhileHolding, TestTranscriptMissingDirectory,
		TestTranscriptOwnReadLost, TestTranscriptCreateRefused, TestTranscriptHandoverWhileDisconnected,
		TestTranscriptHandoverHoldMark, TestTranscriptHandoverCreateInFlight, TestTranscriptOwnNodeDeletedWhileHeld,
		TestTranscriptOwnReleaseIsNotAForeignDelete, TestTranscriptOwnResignIsNotAForeignDelete,
		TestTranscriptOwnNodeGoneWithOurConnection, TestTranscriptDanglingMarkWatchFired,
		TestTranscriptGaveUpWhileTheWatchRequestWasOut, TestTranscriptReaderBehindReaders,
		TestTranscriptReaderWatchesEachWriterBelow, TestTranscriptWriterBehindReaders,
		TestTranscriptWriterBehindWriterRereads, TestTranscriptWriterBehindMarkedWriterHolds, TestTranscriptReleaseNoMark,
		TestTranscriptWriterListsWhenAWriterIsAmongTheRest, TestTranscriptLeases, TestTranscriptLeasesPromotion,
		TestTranscriptDowngrade, TestTranscriptDowngradeWriterGone, TestTranscriptReaderBehindOneWriter,
		TestTranscriptRevokeWhileHolding, TestTranscriptRevokeRequestedBeforeTheGrant,
		TestTranscriptRevokeAcrossAConnectionLoss, TestTranscriptRevokeAfterRelease, TestTranscriptShutdownAtStart,
		TestTranscriptWaiterCancelledThenLost)
}
