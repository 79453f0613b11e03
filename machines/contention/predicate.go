package contention

import (
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Predicate says what a contender waits for and when it holds (Apache
// Curator's LockInternalsDriver): exclusive (the lock, the election),
// read/write (a reader waits only for writers), or leases (a semaphore).
// The zero value is exclusive.
type Predicate struct {
	reader string // ReadWrite: the readers' marker
	leases int    // Leases: how many may hold at once
}

// Exclusive: one holder; a contender waits for every node below its own,
// and watches the one right below.
func Exclusive() Predicate { return Predicate{} }

// ReadWrite is Curator's InterProcessReadWriteLock: nodes named with
// readMarker are readers, any other marker a writer. A reader waits only
// for the writers below it, watching the last of them (never a writer
// above it); a writer waits for every node below it, watching the one
// right below.
func ReadWrite(readMarker string) Predicate { return Predicate{reader: readMarker} }

// Leases lets n contenders hold at once: a contender holds while fewer
// than n nodes are below its own. A waiter watches the directory's
// children and reads again on every change, as Curator's
// InterProcessSemaphoreV2 does: any holder's release may be the one it
// waits for.
func Leases(n int) Predicate { return Predicate{leases: n} }

func (p Predicate) String() string {
	switch {
	case p.leases > 0:
		return fmt.Sprintf("leases(%d)", p.leases)
	case p.reader != "":
		return "read/write(" + p.reader + ")"
	}
	return "exclusive"
}

func (p Predicate) validate() error {
	if p.leases < 0 || (p.leases > 0 && p.reader != "") {
		return fmt.Errorf("contention: predicate %s: leases must be positive, and not beside read/write", p)
	}
	return nil
}

// blockers returns, of the contender nodes below ours (ascending), the
// ones that keep ours from holding: it holds when none are left.
func (p Predicate) blockers(below []string, ours string) []string {
	switch {
	case p.leases > 0:
		if len(below) < p.leases {
			return nil
		}
		return below
	case p.isReader(ours):
		var writers []string
		for _, n := range below {
			if !p.isReader(n) {
				writers = append(writers, n)
			}
		}
		return writers
	}
	return below
}

// watchesDir reports whether a waiter watches the directory's children
// rather than one node (leases: any release may free one).
func (p Predicate) watchesDir() bool { return p.leases > 0 }

// afterGone says what a waiter does when the node it watched (the last of
// its blockers) is gone; held tells that it held (its mark was seen).
// hold: it holds now, with no read (exclusive; a reader behind a writer
// that held: no writer below is left, and only readers can appear below).
// relist: it lists the directory again (a writer behind a writer: a
// downgrading writer makes a reader below it). Otherwise it checks the
// other nodes it saw below.
func (p Predicate) afterGone(ours, gone string, held bool) (hold, relist bool) {
	switch {
	case p.reader == "":
		return held, false
	case p.isReader(ours):
		return held, false
	case !p.isReader(gone):
		return false, true
	}
	return false, false
}

func (p Predicate) isReader(node string) bool {
	return p.reader != "" && strings.Contains(zk.Base(node), "-"+p.reader)
}
