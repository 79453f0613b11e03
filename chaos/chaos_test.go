package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestChaos runs every worker on a real 3-node ensemble under the seeded
// fault schedule and checks what they did (see the package doc).
func TestChaos(t *testing.T) {
	seed := chaosSeed(t)
	logSeedOnFailure(t, seed)
	rep := runSuite(t, config{duration: *chaosDuration, seed: seed, requireAllFaults: true})
	for _, v := range rep.violations {
		t.Errorf("violation: %s", v)
	}
	checkHistory(t, "lock", lockModel, rep.lockHist)
	for name, ops := range rep.fifoHist.partitions() {
		for _, inv := range fifoInversions(ops) {
			t.Errorf("%s: FIFO order broken: %s", name, inv)
		}
	}
	checkHistory(t, "fifo queue", queueModel, rep.fifoHist)
}

// TestChaosCatchesBrokenLock runs the lock workers of the suite, under the
// same kind of fault schedule, on brokenLock, which holds without waiting
// for its predecessor: the checks must report overlapping holds and
// guarded writes whose token went down, and porcupine must reject the
// lock's history.
func TestChaosCatchesBrokenLock(t *testing.T) {
	seed := chaosSeed(t)
	logSeedOnFailure(t, seed)
	rep := runSuite(t, config{duration: 4 * time.Second, seed: seed, brokenLock: true, locksOnly: true})
	var overlaps, fencing int
	for _, v := range rep.violations {
		switch {
		case strings.Contains(v, "two holds overlap"):
			overlaps++
		case strings.Contains(v, "guarded write by"):
			fencing++
		}
	}
	t.Logf("the checks reported %d violations (%d overlapping holds, %d fencing) on the broken lock; the first: %s",
		len(rep.violations), overlaps, fencing, first(rep.violations))
	if overlaps == 0 {
		t.Errorf("the suite did not report the broken lock's overlapping holds")
	}
	if fencing == 0 {
		t.Errorf("the suite did not report the broken lock's out-of-order guarded writes")
	}
	dir := t.TempDir()
	rejected := 0
	for name, ops := range rep.lockHist.partitions() {
		res, path := linearizable(lockModel, ops, dir, "broken "+name)
		if res == porcupine.Illegal {
			rejected++
			t.Logf("porcupine rejects the broken lock's history of %s (%d operations); visualisation: %s", name, len(ops), path)
		}
	}
	if rejected == 0 {
		t.Errorf("porcupine accepted every history of the broken lock")
	}
}

func first(ss []string) string {
	if len(ss) == 0 {
		return "(none)"
	}
	return ss[0]
}
