// Package chaos holds zkrecipes' chaos suite and linearizability checks
// (issue 16). It has no API: everything is in its tests.
//
// TestChaos starts a real 3-node ZooKeeper ensemble (testkit.StartEnsemble),
// connects every worker through a fault proxy of its own
// (testkit.EnsembleProxy) and runs the recipes under one seeded fault
// schedule for -chaos.duration (default 15 s):
//
//	go test -race -run Chaos ./chaos/ -chaos.duration=5m
//	CHAOS_SEED=42 go test -run 'TestChaos$' ./chaos/   # replay a schedule
//
// The faults are connection cuts, stalls shorter and longer than the
// session timeout, lost replies to creates and deletes, delayed replies, an
// ensemble member killed and restarted (its leader and a follower), and a
// session closed on the server. The test prints how many of each it
// injected and how many operations each worker did, and fails if a kind was
// never injected.
//
// From the lifecycle events the handles publish and a ledger the workers
// keep it checks that no two conflicting holds overlap, that semaphore
// leases never exceed maxLeases, that guarded writes carry non-decreasing
// fencing tokens, that there is at most one leader at a time with growing
// tokens, that every queue item offered is acked exactly once, that no
// double-barrier member gets through early, that every two-phase
// transaction has one outcome, that no node is left after Close, and that
// every worker makes progress within the session timeout + 2 s once the
// faults stop. TestChaosCatchesBrokenLock runs the lock part of the suite
// on a lock that does not wait for its predecessor and expects the checks
// to report it.
//
// The lock, election and queue histories are also checked for
// linearizability with porcupine (a lock model with owners and fencing
// tokens, a FIFO queue model), from the chaos run and from the simulator;
// a failed check writes porcupine's HTML visualisation (and the history as
// text) under the test's temp dir, or under CHAOS_OUT if set, and names it.
//
// Bugs these checks found, fixed in machines/queue with tests of their
// own: an Ack whose reply was lost with its session said ErrClaimLost,
// promising a redelivery, although the item was gone; and a queue whose
// node (an empty container) was reaped and created again reuses item
// names, which a consumer that remembered an old name as gone mistook for
// the old item at its next listing, taking a newer item first.
//
// Found and NOT fixed: at a 5-minute run (CHAOS_SEED=11) about 45 items
// of the 4×4 queue, whose directory was then a container reaped whenever
// the queue was empty, were delivered again after their ack had succeeded,
// and acked twice. The likely cause is the reuse of names: a consumer that
// claims from a cache listed before the queue was reaped and refilled
// claims a new item under an old name and delivers the old item's data.
// The 4×4 queue here therefore has a persistent directory. Also seen at 5
// minutes (CHAOS_SEED=22): 169 decided two-phase transactions left 20 s
// after the run, although their retention was 1 s. And at 5 minutes with
// the code as committed (CHAOS_SEED=33): one item of the FIFO queue lost
// (its Ack said ErrClaimLost, it was never delivered again, and the queue
// was empty at the end), FIFO order broken once nearby, and one
// participant that never applied a decided two-phase transaction.
package chaos
