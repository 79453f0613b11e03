// Package election is leader election on ZooKeeper, the recipe whose states
// and events the whole project uses: START → OFFER → DETERMINE → READY →
// LEADER, and FAILED or STOP, as in ZooKeeper's own LeaderElectionSupport,
// plus the session states SUSPENDED, RECONNECTED and LOST.
//
// Two styles share one engine, the lock's:
//
//   - Latch: Campaign blocks until we lead and returns a Term; Resign (or
//     the Term's Release) hands over at once. Nodes are named like Apache Curator's LeaderLatch
//     (_c_<uuid>-latch-<seq>) with the participant id as data.
//   - Selector: Run calls a function while we lead and cancels its context
//     the moment leadership is lost; WithRequeue campaigns again after each
//     term. Nodes are named like Curator's LeaderSelector (_c_<uuid>-lock-).
//
// A Curator process and a Go process using this package elect exactly one
// leader between them on the same path.
//
// # Hand-over
//
// A new leader announces its term with a hold mark:
// an ephemeral node of the same name in the directory path + ".held", made
// right after it is elected, which the participant behind it watches. A
// resign is then one plain delete, and the participant behind leads on
// that delete's event with no read. The hold marks live beside the
// election's directory, not in it, so Curator participants never see them.
//
// # What leadership guarantees
//
// We claim leadership only after checking that our node is the lowest and
// belongs to our current session. Term.Lost closes as soon as leadership can
// no longer be trusted, and Term.Err then says why: ErrSuspended on
// SUSPENDED (by default; WithSuspendedIsLost(false) waits for LOST),
// ErrSessionLost on LOST, ErrNodeDeleted when another client deletes our
// node (seen through the watch that the read of our own node leaves, at
// its one notification, with no extra request), ErrResigned on Resign,
// ErrClosed on Close. A waiter whose own session expires, or whose node is
// deleted, fails at once, not when its predecessor goes. A request whose
// reply is lost to a connection loss is sent again once the same session
// is back, and is never taken for our node's deletion. As with any lease,
// a paused leader can act after its term ended: use Term.Token (the czxid
// of our node, growing with every term) as a fencing token, or put
// Term.Guard in the multi of a write to ZooKeeper itself.
//
// Run's function finds its term in its context (TermFrom), to fence its
// writes. When the term ends, that context is cancelled and
// context.Cause of it is the term's Err. Run then returns the term's Err,
// not the nil (or context.Canceled) that a function stopping on its
// context returns, so a lost session never looks like a normal finish; an
// error of the function's own is returned as it is. When Run's own context
// ends, campaigning or leading, Run returns nil.
//
// Close deletes our node, waiting at most the close timeout. When the
// connection is down then, the connection itself deletes the node once the
// same session reconnects (Close returns ErrCleanupPending): the next
// participant is elected then, not only when the session expires.
//
// # Failover
//
// Resign or Close hands leadership over at once. A leader that crashes, or
// is cut off from the ensemble, is replaced once the server expires its
// session: after the session timeout, and up to one server tick (tickTime,
// 2 s by default) more. Its node is ephemeral, so only the session's expiry
// deletes it, and the server looks for expired sessions once per tick; the
// participant behind sees the delete through its watch.
//
// # Lifecycle events
//
// Every attempt (term) N starts with OFFER_START and ends exactly once, with
// STOP_START (withdrawn or resigned; STOP_COMPLETE follows once our node is
// deleted) or FAILED. ELECTED_START and ELECTED_COMPLETE come at most once
// per term, between the two: so every ELECTED_COMPLETE is followed by a STOP
// or FAILED of the same term, and no STOP comes for a term that did not
// start.
// Each event of a term names our node (Event.Node) once its create has
// answered; a term that ends before then names, on FAILED or STOP, the
// protected prefix the create used, whose uuid finds the node if the
// create was applied.
//
// # Observing
//
// Leader and Participants read the current state; Observe streams every
// leader change, in order, once each, to each caller on its own channel,
// starting with the current leader (or a vacant Leader when there is none).
package election
