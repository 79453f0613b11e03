// Package runtime is the actor every recipe instance runs in.
//
// An Actor is one goroutine reading one unbounded Mailbox. Everything that
// can happen to a recipe instance reaches it as a message: a call from the
// user, the reply to a ZooKeeper request or a watch's event (waited for
// off the actor by Go and posted back), a session state change
// (WatchSession). The actor handles one message at a time, so the state it
// owns needs no locks, and nothing it does blocks on the network.
//
// When the actor stops, the context its requests run under is cancelled,
// and Done is closed only once every goroutine it started has ended: an
// actor leaves nothing behind.
//
// Shell runs any recipe's pure machine in an Actor: the recipe gives it
// the machine (Start and Step, returning events, commands, replies and
// ended terms) and an Exec that makes one command's ZooKeeper requests.
// The shell does the rest: the standard inputs (SessionChange, Cancel,
// Shutdown, Handover), which it makes and posts itself, request ids and
// calls (Do), a CLIENT span per request under the span of the call that
// caused it while that call is in progress (after it, a root span linked
// to it; see Telemetry), grants and session changes as events on the
// spans in progress, holds' durations, the lifecycle events on a Bus with
// the trace of the call that began the term, the session fan-out, and a Loss
// per granted term, closed with its cause. Close is every handle's Close:
// the machine's shutdown within a timeout, then the hand-over of what it
// still owes to the janitor; the first call's result on every later call.
// A machine's illegal transition (FSM.Bug) is published as a FAILED event.
//
// HandOver gives a connection's janitor the nodes a closed recipe still
// owed; it deletes them when the same session reconnects.
//
// FSM wraps github.com/looplab/fsm so that its traps cannot be hit: states
// and triggers are typed constants checked when the machine is built, a
// cancelled context can never wedge it, and a self-transition is not
// reported as an error.
package runtime
