package contention

import (
	"fmt"
	"slices"
	"strings"
)

// Predicate says what a contender waits for and when it holds (Apache
// Curator's LockInternalsDriver): exclusive (the lock, the election),
// read/write (a reader waits only for writers), or leases (a semaphore).
// The zero value is exclusive.
type Predicate struct {
	kind   predicateKind
	reader string // readWrite: the readers' marker
	leases int    // leases: how many may hold at once
}

type predicateKind uint8

const (
	exclusive predicateKind = iota
	readWrite
	leases
)

// Exclusive: one holder; a contender waits for every node below its own,
// and watches the one right below.
func Exclusive() Predicate { return Predicate{} }

// ReadWrite is Curator's InterProcessReadWriteLock: nodes named with
// readMarker are readers, nodes with any other of Config.Markers writers.
// A reader waits only for the writers below it, watching the last of them
// (never a writer above it); a writer waits for every node below it,
// watching the one right below.
func ReadWrite(readMarker string) Predicate { return Predicate{kind: readWrite, reader: readMarker} }

// Leases lets n contenders hold at once: a contender holds while fewer
// than n nodes are below its own. Releases come in any order, so the
// first waiter (exactly n below it, all holding) watches each of them and
// holds when any goes. Every other waiter watches the data of the waiter
// ahead of it, which a waiter sets once it holds (promote): then the one
// behind is first, lists again and watches the holders. A lease that ends
// wakes one waiter, where Curator's InterProcessSemaphoreV2 wakes every
// one (a directory watch).
func Leases(n int) Predicate { return Predicate{kind: leases, leases: n} }

func (p Predicate) String() string {
	switch p.kind {
	case leases:
		return fmt.Sprintf("leases(%d)", p.leases)
	case readWrite:
		return "read/write(" + p.reader + ")"
	}
	return "exclusive"
}

// validate checks p against the directory's markers: leases must be at
// least one; the readers' marker must be one of markers, beside at least
// one writers' marker.
func (p Predicate) validate(markers []string) error {
	switch {
	case p.kind == leases && p.leases < 1:
		return fmt.Errorf("contention: predicate %s: leases must be at least 1", p)
	case p.kind == readWrite && (!slices.Contains(markers, p.reader) || len(markers) < 2):
		return fmt.Errorf("contention: predicate %s: the readers' marker must be one of the markers %q, beside a writers' one", p, markers)
	}
	return nil
}

// blockers returns, of the contender nodes below ours (ascending), the
// ones that keep ours from holding: it holds when none are left.
func (p Predicate) blockers(below []string, ours string) []string {
	switch {
	case p.kind == leases:
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

// afterGone says what a waiter does when gone, the node it watched (the
// last of its blockers), is gone; held tells that gone left as a holder
// (its release mark, or its hold mark, was seen).
//
// hold: it holds now, with no read. A node that held had nothing below it
// that excludes it, and nodes appear below ours only by a downgrade: a
// writer that makes a reader at its own sequence while it holds. A writer
// that leaves a reader so releases with a plain delete, not the release
// mark (Release.NoMark). So an exclusive waiter holds, a reader behind a
// writer that held holds (a reader below does not exclude it), and so does
// a writer behind a writer that left with its mark.
//
// relist: it lists the directory again: a writer behind a writer that went
// with no mark (a downgrade's release, a waiter that gave up, an expiry,
// Curator) may have left a reader below ours (see mustRelist). Otherwise
// it checks the other nodes it saw below.
func (p Predicate) afterGone(ours, gone string, held bool) (hold, relist bool) {
	switch {
	case p.mustRelist(ours, gone) && !held:
		return false, true
	case p.kind == exclusive, p.isReader(ours), !p.isReader(gone):
		return held, false
	}
	// A writer behind a reader that held: readers hold together, so the
	// readers below it may still hold.
	return false, false
}

// marked reports whether a waiter ours that waits for watched also
// watches watched's release mark (which tells it watched left as a
// holder). Under an exclusive predicate it does. Under read/write only a
// writer behind a writer does: the only waiter that watches that mark (a
// writer waits for the node just below it), so that when the writer goes
// without its mark, the waiter can fire the mark's watch and leave none
// behind (see machine.fireDanglingMark). A reader watches the deletion
// of each writer below it (see readerBehindWriters); a writer behind a
// reader learns nothing from the reader's mark (readers below may still
// hold). Marks are not used by leases.
func (p Predicate) marked(ours, watched string) bool {
	switch p.kind {
	case exclusive:
		return true
	case readWrite:
		return !p.isReader(ours) && !p.isReader(watched)
	}
	return false
}

// mustRelist reports whether a waiter that finds gone, a node it saw
// below its own, gone with no mark (watched or checked) must list the
// directory again before it trusts what it saw: under read/write, a writer
// behind a writer, which may have downgraded to a reader below ours.
func (p Predicate) mustRelist(ours, gone string) bool {
	return p.kind == readWrite && !p.isReader(ours) && !p.isReader(gone)
}

// writerBehindReaders reports whether ours is a writer whose blockers
// are two or more readers and nothing else: readers with no writer below
// them, which all hold.
func (p Predicate) writerBehindReaders(ours string, blockers []string) bool {
	return p.kind == readWrite && !p.isReader(ours) && len(blockers) > 1 && !slices.ContainsFunc(blockers, func(n string) bool { return !p.isReader(n) })
}

// readerBehindWriters reports whether ours is a reader with two or more
// writers below it (blockers are only writers for a reader). It watches
// each: their deletions tell it when none is left, with no read after the
// last. (The last one's release mark could tell it that too, but other
// readers watch that mark, so it could not be fired safely were that
// writer to go without it: see marked.)
func (p Predicate) readerBehindWriters(ours string, blockers []string) bool {
	return p.kind == readWrite && p.isReader(ours) && len(blockers) > 1
}

// isReader reports whether node (a name or path) is a reader's: its name
// ends with the readers' marker and a 10-character sequence.
func (p Predicate) isReader(node string) bool {
	return p.kind == readWrite && len(node) >= 10 && strings.HasSuffix(node[:len(node)-10], p.reader)
}
