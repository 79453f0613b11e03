// Package semaphore is a distributed counting semaphore on ZooKeeper: at
// most maxLeases leases are held at once, over every process that shares
// the semaphore's path (Apache Curator's InterProcessSemaphoreV2).
//
//	s, err := semaphore.New(conn, "/app/sem/gpu", 3)
//	l, err := s.Acquire(ctx)     // blocks until a lease is free
//	defer l.Release(ctx)
//	<-l.Lost()                   // closed when the lease can no longer be trusted
//
// # Nodes
//
// Each lease is one ephemeral sequential node,
// <path>/leases/_c_<uuid>-lease-<seq10>, Curator V2's layout, so a Curator
// process and this package count each other's leases on the same path and
// never exceed maxLeases together. A contender holds a lease when fewer
// than maxLeases lease nodes are queued before its own (the lock's
// algorithm, with that rule for holding). A lease that ends wakes one
// waiter: the first waiter watches each holder and holds when any goes,
// with no read; every other waiter watches only the data of the waiter
// ahead of it, which a waiter sets (same data, next version) once it
// holds, and then lists once and becomes the first. Curator wakes every
// waiter on every change of the directory. There is no internal
// mutex: Curator passes every acquirer through one under <path>/locks (a
// create, a listing and a delete more per lease); this package needs none,
// since a node queued before ours can only go, never come.
//
// Curator's waiters hold when the leases directory has at most maxLeases
// children; ours, when fewer than maxLeases are before ours. Both rules
// are safe together (never more than maxLeases holders), but a Curator
// waiter counts our waiters behind it too, so beside ours it may wait
// longer than its place in the queue says; and a Curator waiter does not
// set its data when it holds, so our waiter behind it may wait for it to
// go while a lease is free.
//
// # maxLeases
//
// The path's data records maxLeases in decimal, as kazoo does: the first
// acquire of a handle (one read, cached) creates the path (persistent,
// missing parents as containers) with its maxLeases if it is missing,
// records it on a path with empty data (Curator records nothing), and
// accepts a path that records the same number. A path recording another
// number fails every acquire with ErrMaxLeasesMismatch, and nothing is
// created: two groups that disagree on maxLeases would admit more than
// either meant.
//
// # Handles and leases
//
// One handle may hold several leases at once (AcquireN, or concurrent
// Acquires). Each lease is one term of one machine, an actor of its own
// like a lock handle's; the handle keeps a pool of them, one per lease
// held or wanted at once, reused for later leases and all stopped by
// Close. Lifecycle events of every instance come through Subscribe.
// AcquireN takes its leases one after the other, all or none; see its doc
// for what two AcquireN callers can do to each other.
//
// # What a lease guarantees, and what it does not
//
// A Lease means: when it was granted, fewer than maxLeases nodes were
// queued before ours, and our node belonged to our session. It lasts as
// long as that session lives and no one deletes the node. Lease.Lost
// closes as soon as the lease can no longer be trusted, and Lease.Err
// says why: ErrSuspended on SUSPENDED (the default;
// WithSuspendedIsLost(false) waits for LOST), ErrSessionLost on LOST
// (the server deleted our ephemeral node, and the lease went to the next
// waiter), ErrNodeDeleted when another client deletes our node,
// ErrReleased on Release, ErrClosed on Close. A holder paused between
// checking Lost and using the resource may use it after its lease ended:
// fence with Lease.Token (the czxid of our node) or, for data in
// ZooKeeper, put Lease.Guard in the same multi as the write.
//
// # Failures
//
// As for the lock: a create whose reply is lost is found again by its
// uuid; any other request whose reply is lost is sent again once the same
// session is back; everything created and no longer wanted (a cancelled
// Acquire, a failed AcquireN, a late reply) is deleted in the background,
// and what Close could not delete within its timeout the connection
// deletes when the session is back (Close then returns
// ErrCleanupPending). Acquire returns ctx.Err() when its context ends,
// and its node goes.
//
// # Failover
//
// A Release or Close hands a lease to the next waiter at once. A holder
// that crashes, or is cut off from the ensemble, keeps its lease until the
// server expires its session: the session timeout, and up to one server
// tick (tickTime, 2 s by default) more. The lease node is ephemeral, so
// only the session's expiry deletes it, and the server looks for expired
// sessions once per tick; the waiter behind sees the delete through its
// watch.
//
// # Observing
//
// Every transition of each instance's machine is published to
// Subscribe'd channels; Acquire, TryAcquire, AcquireN and Release are
// OpenTelemetry spans ("semaphore.acquire <path>", "semaphore.try_acquire
// <path>", "semaphore.acquire_n <path>", "semaphore.release <path>"), with
// a CLIENT child span per ZooKeeper request (the maxLeases check's and the
// lease's), by the conventions the lock package describes; a lease's
// length is zkrecipes.hold.duration.
package semaphore
