// Package rwlock is a distributed read/write lock on ZooKeeper: many
// readers, or one writer.
//
// Each participant (New) has a read lock and a write lock on one path.
// Each Acquire creates one ephemeral sequential node there, named exactly
// like Apache Curator's InterProcessReadWriteLock
// (_c_<uuid>-__READ__<seq> and _c_<uuid>-__WRIT__<seq>), so a Curator
// process and this package exclude each other on the same path. The queue
// is fair: a reader holds when no writer is ahead of it, and waits on the
// last writer ahead of it (never on one behind it: kazoo deadlocked that
// way); a writer holds when nothing is ahead of it, and waits on the node
// right before its own. Readers behind a queued writer wait for it, so
// writers do not starve.
//
// # Hand-over
//
// A reader watches the node of every writer ahead of it (one round of
// requests) and holds when the last goes, with no read. A writer waiting
// on readers alone watches each of them the same way. A writer waiting
// on a writer also watches its release mark, which a
// holder makes and deletes in the multi that deletes its node: seeing it,
// it holds with no read. A writer that goes without the mark (it gave up,
// its session ended, or it downgraded) leaves that watch waiting for a
// creation that never comes; its successor, the mark's only watcher,
// fires it in the multi that ends its own term, so no watch (and no
// client goroutine) waits for the session's end.
//
// # Downgrade and upgrade
//
// A participant holding the write lock may take the read lock at once,
// then release the write lock: a downgrade. The reader is created at the
// writer's place in the queue (its node carries the writer's sequence, in
// one multi that checks the writer still exists), so every writer queued
// behind ours keeps waiting, now for the reader. Writers that waited on
// our writer list the directory again when it goes, and find the reader.
// (Curator gives a downgraded reader a new, later sequence: a queued writer
// may get in beside it.)
//
// Holding only the read lock and asking for the write lock would wait
// forever (the writer waits for every reader ahead of it, ours included):
// it fails at once with ErrUpgrade, with nothing sent.
//
// # Sharing a participant
//
// The write lock is a mutex across goroutines as across processes, like
// sync.Mutex: goroutines sharing one participant exclude each other too. An
// Acquire of a write lock that holds waits until that hold is released (by
// any goroutine), and TryAcquire on it says false at once; every hold is
// released, also one that was lost (Release then says ErrNotHeld). The read
// lock counts its holds: goroutines sharing it read together, and its node
// goes with the last Release. WithReentrant makes the
// write lock count its holds too.
//
// # Failover
//
// When a holder's process dies or is cut off, the waiters behind it hold
// once the server has expired the holder's session, which deletes its node:
// that takes the session timeout (zk.WithSessionTimeout, as the server
// granted it) after the server last heard from the holder, plus up to one
// server tick (tickTime, 2 s by default), because the server expires
// sessions on a grid of ticks, not at their exact deadline. A holder that
// releases, or closes its connection, hands over at once.
//
// # Grants
//
// A Grant says what lock.Grant says: Lost closes as soon as the hold can
// no longer be trusted (Err says why), Token is the fencing token (our
// node's czxid) and Guard a check for a zk Multi. Faults are handled as
// the lock package describes: a create whose reply was lost is found by
// its uuid, other lost replies are sent again, and whatever a participant
// no longer wants is deleted, also after Close.
//
// With WithRevocable, a holder is told when someone asks it to give its
// lock up (Grant.RevokeRequested; lock.RequestRevoke or Curator's Revoker
// write the request into its node), and decides when to release.
//
// Holders tells who holds a lock now, from any connection, without taking
// part.
package rwlock
