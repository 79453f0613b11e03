// Package lock is a distributed, fair exclusive lock on ZooKeeper.
//
// Each Acquire creates one ephemeral sequential node under the lock's path,
// named like Apache Curator's InterProcessMutex (_c_<uuid>-lock-<seq>), so a
// Curator process and this package exclude each other on the same path.
// Waiters queue in sequence order (FIFO) and each watches only the node just
// before its own, so a release wakes exactly one waiter. A holder releases
// by deleting its node in one multi that also creates and deletes a marker
// node beside it (named <node>.released), which the waiter behind watches
// for: the waiter then holds the lock with no further read (delete →
// notification, where other libraries need delete → notification →
// getChildren). Curator's waiters see a plain delete.
//
// # A handle is a mutex
//
// A Lock is a mutex across goroutines as across processes, like sync.Mutex:
// goroutines that share one handle exclude each other too. An Acquire on a
// handle that holds waits until that hold is released (by any goroutine, with
// Lock.Release or Grant.Release), and TryAcquire on it says false at once.
// Every hold is released, also one that was lost (Release then says
// ErrNotHeld): until then the handle's next Acquire waits. A handle made
// WithReentrant counts holds instead: an Acquire on a handle that holds, from
// any goroutine, returns at once with the same grant and one more hold, and
// the Release that balances the first lets go.
//
// # What a grant guarantees, and what it does not
//
// A Grant means: when it was given, our node was the lowest in the queue,
// and it belonged to our session. From then on the lock is held for as long
// as that session lives and no one deletes the node. A process cannot know
// that instantly: while the connection is down (SUSPENDED) the session may
// already have expired on the server, and another process may hold the
// lock. Grant.Lost closes as soon as the hold can no longer be trusted,
// and Grant.Err then says why: ErrSuspended on SUSPENDED (the default;
// WithSuspendedIsLost(false) waits for LOST), ErrSessionLost on LOST,
// ErrNodeDeleted when another client (an operator, a script) deletes our
// node, ErrReleased on Release, ErrClosed on Close. No grant is given while
// the connection is down: a waiter that learns it is next from a reply or
// a watch event read before the connection dropped, but handled after
// SUSPENDED, holds once the same session is back (RECONNECTED), and not
// at all if the session ends. A deletion is seen with
// no extra request: the read of our own node that every Acquire makes
// leaves a watch on it, and Lost closes at its one notification. Our own
// Release's delete is never taken for another client's.
//
// Even so, a holder paused (GC, swap) between checking Lost and writing
// somewhere can write after its grant ended. Use the fencing token
// (Grant.Token: the czxid of our node, growing with every grant) in the
// resource you protect, or, for data in ZooKeeper itself, put Grant.Guard in
// the same multi as the write so the server refuses it once the node is
// gone.
//
// # Failures
//
// A create whose reply is lost is found again by its uuid, in a listing
// made after a sync (the server reconnected to may not have applied it
// yet), and adopted only if it belongs to the current session. Any other request whose reply is
// lost to a connection loss is sent again once the same session is back:
// a failed read says nothing about our node, and is never taken for its
// deletion. Everything a Lock created and no
// longer wants — after a cancelled Acquire, a failure, a late reply — is
// deleted in the background until the delete succeeds or the session ends,
// and that outlives Close: what Close could not delete within its timeout
// (the connection is down) the connection itself deletes when the same
// session reconnects, and Close says so with ErrCleanupPending. Acquire
// returns ctx.Err() when its context ends, and its node goes.
//
// # Failover
//
// When a holder's process dies or is cut off, the next waiter holds once the
// server has expired the holder's session, which deletes its node: that
// takes the session timeout (zk.WithSessionTimeout, as the server granted it)
// after the server last heard from the holder, plus up to one server tick
// (tickTime, 2 s by default), because the server expires sessions on a grid
// of ticks, not at their exact deadline. The waiter's watch then fires and it
// holds with no further read. A holder that releases, or closes its
// connection, hands over at once.
//
// # Revocation
//
// A holder may be asked to give the lock up (Curator's Revoker): on a Lock
// made WithRevocable, the holder watches its own node's data while it
// holds, and Grant.RevokeRequested closes, with a REVOKE_REQUESTED event,
// once the node says "__REVOKE__" (what RequestRevoke and Curator's
// Revoker.attemptRevoke write) or "unlock" (ZooKeeper's recipe text),
// including when it already said so at the grant. Nothing is taken by
// force: the holder decides, and releases when it is ready; until then it
// holds. A request after the release finds no node (ErrNotHeld, matching
// zk.ErrNoNode too) and reaches no one. Our RequestRevoke reaches a
// Curator holder that called makeRevocable.
//
// # Several locks as one, and who holds a lock
//
// A Multi (NewMulti) holds several locks as one, like Curator's
// InterProcessMultiLock: Acquire takes them one after the other, always in
// sorted path order whatever order they were given in, so two Multis over
// the same locks never deadlock; it returns when it holds all of them, and
// when it fails or its ctx ends it releases those it took. Its
// MultiGrant.Lost closes as soon as any of them is lost, and Err names
// which one and why (a *PartError). The other locks stay held until
// Release or Close.
//
// Holders says who holds the lock at a path now (its node, its id: the
// node's data, WithID's for ours, and its token), without creating anything: Curator's holders count, waiters
// do not.
//
// # Observing
//
// Every transition of the lock's machine (START, OFFER, DETERMINE, READY,
// LEADER, FAILED, STOP) is published to Subscribe'd channels, and every
// Acquire, TryAcquire and Release is an OpenTelemetry span, by the
// conventions of runtime.Telemetry: "lock.acquire <dir>" (INTERNAL, a child
// of the caller's span) ends at the grant, failure or cancel, and carries
// the grant's zookeeper.node, zookeeper.czxid (the token) and
// zookeeper.session.id (hex) and an ELECTED_COMPLETE event; SUSPENDED,
// RECONNECTED and LOST are events on the span of a call in progress. Each
// ZooKeeper request is a CLIENT child "<op> <dir>" ("create /app/locks/x")
// naming its node in zookeeper.node, never in the span's name; an expected
// answer (no_node when the directory is not made yet) is its
// zookeeper.result, not an error. Requests made after their call returned
// (a grant's hold mark, a cancelled attempt's clean-up) are root spans
// linked to it. A failed call's span has status Error and error.type
// ("session_lost", "canceled", ...). A hold is not a span: its length is
// the histogram zkrecipes.hold.duration (by outcome: "released", or the
// cause's error type), and each request's is db.client.operation.duration,
// on the meter provider of WithMeterProvider.
package lock
