// Package twophase is two-phase commit on ZooKeeper: a Coordinator
// proposes a transaction to named participants, each Participant's Handler
// votes on it (Prepare), and every participant learns the one decision
// (Commit or Abort).
//
// Layout under the root path:
//
//	<root>/participants/<id>          ephemeral: the participant is serving
//	<root>/inbox/<id>/<txID>          persistent: tx waiting for participant id
//	<root>/tx/<txID>                  persistent: payload and participants
//	<root>/tx/<txID>/coordinator      ephemeral: the coordinator's session
//	<root>/tx/<txID>/votes/<id>       "yes" or "no:<reason>"
//	<root>/tx/<txID>/decision         "commit" or "abort:<reason>", created once
//
// The transaction node, its coordinator node, its votes directory and every
// participant's inbox entry are created in one multi, so a participant never
// sees half a proposal. A participant learns of its transactions from one
// child watch on its own inbox (one notification per transaction and
// participant, not one per transaction and every participant).
//
// The decision node is created exactly once: the coordinator creates
// "commit" only when every participant voted yes, and only while its own
// node is there (a check of it in one multi with the create: a
// coordinator whose session ended never commits, even on votes it read
// just before); "abort" is created by a
// participant voting no (in one multi with its vote, so that a no vote is
// never there without an abort decision, and the coordinator counts the
// votes by name, without reading them), by the coordinator on the vote
// timeout, and by a participant when the coordinator's ephemeral node is
// gone before a decision (its session ended). A create that fails with
// NodeExists reads the decision instead, so no two participants ever see
// different outcomes.
//
// Guarantees and limits:
//
//   - A participant's Commit or Abort is called at least once per
//     transaction: its inbox entry is deleted only after the handler
//     returned nil, and a restarted participant (same id, any session)
//     picks up its inbox: no vote yet → Prepare and vote; voted → wait for
//     the decision; decided → Commit or Abort. Prepare may be called again
//     if the participant restarted between Prepare and writing its vote.
//   - Votes are final: a vote node is never changed.
//   - Finished transactions are deleted by their coordinator's handle after
//     the retention period (WithRetention), and not before every
//     participant has had its Commit or Abort call (its inbox entry is
//     gone), however long it was down. A coordinator closed before then
//     leaves them to the next coordinator on the root, which deletes them
//     on the same terms. A participant that is never coming back keeps its
//     inbox and its transactions: delete its inbox to let them go.
//   - If Propose's ctx ends before a decision, it tries to decide abort;
//     when it cannot reach the server the transaction stays open until the
//     coordinator's session ends, which aborts it.
//
// Propose refuses a participant that is not registered (not serving):
// WaitRegistered waits until the ones named are.
//
// Failover: a coordinator or participant that dies is seen gone only when
// its session expires, after the session timeout plus up to one server
// tick (the server expires sessions in tick-sized batches), when its
// ephemeral node goes. Then the participants waiting for a dead
// coordinator's decision decide abort (ReasonCoordinatorGone), and a
// Propose naming a dead participant is refused (ErrUnknownParticipant);
// a Propose already waiting for that participant's vote waits for it
// until its vote timeout.
//
// Events (Subscribe): a participant publishes PREPARED when its Prepare
// returned, VOTED when its vote is written (a no vote with its reason in
// Err), and COMMITTED or ABORTED (the reason in Err, wrapping ErrAborted)
// once its Commit or Abort returned nil; a coordinator publishes COMMITTED
// or ABORTED once per transaction it proposed. Spans: a Propose is one span
// ("twophase.propose <root>", under the caller's; the transaction id in
// zkrecipes.twophase.tx, never in a name) with a child per phase
// ("twophase.prepare <root>": collecting the votes, "twophase.decide
// <root>") and a CLIENT child per ZooKeeper request; a participant opens a
// span per transaction ("twophase.participate <root>") with a child per
// handler call ("twophase.prepare", "twophase.commit", "twophase.abort").
// Both use the providers of WithTracerProvider and WithMeterProvider
// (NewParticipant takes them too); the coordinator counts decided
// transactions in zkrecipes.twophase.transactions by outcome.
//
// Both handles are actors: a pure state machine, run by a runtime.Shell
// on one goroutine with one mailbox, whose ZooKeeper requests (and a
// participant's Handler calls) are made off the actor, on goroutines of
// the handle's, and come back to it as inputs. A participant's handler is
// called one call at a time, with a ctx that carries Serve's values and
// ends with it. Its states (State): START while not serving, DETERMINE
// while serving with transactions pending, READY while serving and idle,
// FAILED after its session ended until it is registered again, STOP once
// closed. A coordinator's machine follows each transaction from its
// create to its deletion: its states are START while no Propose is in
// progress, DETERMINE while one is, STOP once closed.
package twophase
