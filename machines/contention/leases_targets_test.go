package contention_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Leases(2) on each target: a holder releases after the third
// contender's listing was made and before its reply came. The listing
// says two are below, so it waits; the watches it sets on the holders
// after come too late for that release's event. The check that sets them
// finds the first gone, and it holds (it must not wait with a lease free
// until some other change).
func TestLeasesReleaseBeforeTheWatchOnEachTarget(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		const dir = "/preds/leases-race"
		p, markers := contention.Leases(2), []string{"lease-"}
		a := newContender(t, tg.Connect(t), dir, markers, p)
		b := newContender(t, tg.Connect(t), dir, markers, p)
		cc := tg.Connect(t)
		c := newContender(t, cc, dir, markers, p)

		holds(t, "the first", a.acquire(ctx, ""))
		holds(t, "the second", b.acquire(ctx, ""))
		listing := tg.HoldNextReply(t, cc, testkit.OpChildren, dir)
		cch := c.acquire(ctx, "")
		select {
		case <-listing.Fired():
		case <-ctx.Done():
			t.Fatal("the third's listing never reached the server")
		}
		a.release(t, ctx)
		listing.Release()
		holds(t, "the third, whose listing missed the first's release", cch)
	})
}
