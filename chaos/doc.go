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
// session timeout, lost replies to creates, deletes and multis, delayed
// replies, an ensemble member killed and restarted (its leader and a
// follower), and a session closed on the server. The test prints how many of each it
// injected and how many operations each worker did. It keeps injecting past
// the duration (for up to 30 s) until every kind was injected once, and
// fails if one still was not.
//
// One worker group is secured (issue 35): the workers of the last lock
// path connect over TLS (every member has a secure client port beside its
// plain one, and their proxies terminate TLS: testkit.NewTLSEnsembleProxy),
// authenticate with a digest identity and work under a chroot, so their
// nodes carry CreatorAll plus world read, and take every fault the others
// take. Two fault kinds of their own make sure that every run cuts one of
// them and closes one's session on the server: after a connection loss
// and after an expiry (a new session) they must keep working as the same
// identity. An intruder of another identity tries all
// along to delete, overwrite and create under their nodes; anything but a
// refusal (zk.ErrNoAuth) or a node already gone is a violation. The checks
// below apply to the group as to the rest, nodes left under its chroot
// included.
//
// The queue workers run on both layouts (issue 36): two unsharded queues
// (4 producers and 4 consumers; a FIFO one, 2 producers and 1 consumer)
// and a queue of 4 shards (queue.WithShards), whose 2 producers offer
// with OfferKey (three keys each) to 4 consumers; the simulator run has
// the FIFO queue and a sharded one (2 consumers).
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
// The queues are drained, and the two-phase transactions settled, only
// once every producer's last Offer or Propose has returned: one still in
// flight when the drain saw an empty queue could land after it, and its
// item was then counted lost (a false report, CI seed
// 3798802641126722384).
//
// Bugs these checks found and that are fixed, each with a test of its own:
//
//   - queue: an Ack whose reply was lost with its session said
//     ErrClaimLost, promising a redelivery, although the item was gone (now
//     ErrUncertain; TestAckAppliedThenSessionLost);
//
//   - queue: the queue's node was a container. Reaped when empty and made
//     again, it numbered items from 0 again; a consumer took a reused name
//     for a gone item, and a claim could deliver data read ahead from the
//     old item of that name. The queue's own node is now persistent, a
//     listing that shows the node made again forgets the old names, and a
//     claim delivers only the data read behind it (transcripts
//     queue_node_recreated, claim_delivers_the_data_read_behind_it);
//
//   - double barrier: a member counted out of a round (its session expired
//     inside) that entered again while the others were still in counted
//     them and was let in at once; they could have listed their round
//     before its node came, and then left without waiting for it. Found
//     by reading the machine while looking into a failure of seed 303
//     (below), which it may not explain. A member that arrives while a
//     round is in progress now waits for the next one
//     (TestDoubleBarrierCountedOutMemberWaitsForTheNextRound, which fails
//     on the old code, and transcript round_in_progress);
//
//   - two-phase commit: decided transactions were left for good when their
//     Propose gave up or their coordinator closed, and a participant down
//     for longer than the retention never had its Commit or Abort call; now
//     the janitor decides and deletes what a Propose gave up on, a new
//     coordinator deletes what a closed one left, deletion waits for every
//     participant's call, and the janitor works eight transactions at a
//     time (TestNextCoordinatorDeletesWhatTheLastLeft,
//     TestTransactionKeptUntilEveryParticipantHadItsCall);
//
//   - two-phase commit: Close during a participant's registration could
//     leave its node (transcript close_while_registering).
//
//   - queue: an ack asked while the connection was down went out on
//     whatever session came next; after an expiry its delete of the claim
//     node could delete another consumer's claim of the item, and the item
//     with it (items delivered again after their ack succeeded, acked
//     twice). Acks and nacks are now held until the same session is back
//     (transcript ack_held_while_disconnected). A request the client has
//     queued but not sent when its connection drops still goes out on the
//     next session: that window is narrower now, not closed.
//
//   - double barrier: a member passed Enter on the watch event of the
//     ready node its own multi had made (the server sends a watch's event
//     before the reply to the request that fired it); a Leave begun before
//     that reply then took the member node for a withdrawn call's and
//     deleted it while the member was inside, and the others were through
//     Leave before it had begun. Enter now waits for its own node, and a
//     Leave that finds its node gone without its delete says
//     ErrSessionLost (transcripts ready_before_our_join_reply,
//     node_gone_before_leave).
//
//   - queue: after an ack whose reply was lost, the consumer looked for
//     the item and then for its claim, without a sync, on the server it
//     had reconnected to. That server could still be applying the ack's
//     multi: it showed the item, then no claim, and the Ack said
//     ErrClaimLost for an item gone for good (CI, seed
//     3239071864897113548: "offered but never acked"). The same missed
//     write could make a take drop an item its own delete removed, or a
//     lock hunting for its lost create make it again and wait on the
//     first as a ghost. Each read after a lost reply now syncs first, and
//     the queue reads the claim before the item; internal/lagging makes
//     the late write happen every time (TestAckReplyLostReadFromALaggingServer,
//     TestTakeDeleteReplyLostReadFromALaggingServer,
//     TestGhostNodeAdoptedFromALaggingServer fail without the sync).
//
//   - queue: an ack whose reply was lost was checked (sync, claim, item),
//     found still to hold its claim and sent again; the first multi then
//     landed just before the second, which found the claim gone, and the
//     Ack said ErrClaimLost (the item comes again) for an item gone for
//     good (a 2-minute run, seed 6212693029425474666, 0 digest
//     mismatches: "offered but never acked"; its trail showed one TakeItem
//     and that Ack). How the first came to land after the sync and reads
//     of the check is not known: a request on a connection the client had
//     left, read by the server after the next connection's, or a read the
//     sync did not bring up to date, would do it.
//     A write made again after a lost reply now takes a miss of its
//     target (a claim gone, a claim there, an item gone) as a sign the
//     first landed and checks again (TestAckLandingAfterItsCheck,
//     TestClaimLandingAfterItsCheck, TestTakeDeleteLandingAfterItsCheck,
//     transcript ack_sent_again_finds_its_first_landed); and a check
//     whose reads were made on another session than the machine's is
//     not judged until the machine knows that session (transcript
//     ack_checked_on_the_next_session_first).
//     The queue ledger now also reports an item delivered from two nodes
//     or a node with two items' data, and prints a lost item's lifecycle
//     events with its trail.
//
// Seen 2026-11-27, fixed the same day: one 2-minute run after that fix
// (seed 3963624285873986539, 0 digest mismatches) left an item in the
// queue, offered at 40.5 s and never delivered ("not drained ... 1 nodes
// in it"; it was still there once every handle had closed).
// TestConsumeThroughSessionExpiry failed the same way, once in about 300
// runs before that fix and once in about 500 after, the item left claimed
// by a live session. The cause, found by reading: a claim asked as a
// session ended went out on the next session (go-zookeeper sends what it
// had queued), and its reply reached the machine before the news of the
// new session; the claim was recorded under the old session, forgotten
// when that session's end was handled, and waited on as another
// consumer's for as long as the new session lived. A claim's reply, and a
// check's, now carry the session they were made on, and the machine
// judges them only once it knows that session (TestClaimMadeOnTheNextSession
// on the simulator and the real server, transcript
// claim_made_on_the_next_session_first: both fail on the old code). After
// the fix, 900 -race runs of TestConsumeThroughSessionExpiry passed. An
// ack can go out on the next session the same way; since issue 36 a claim
// bumps its item's version and the ack deletes at that version, so such an
// ack fails on the server instead of deleting another consumer's claim
// (TestLateAckOnTheNextSessionFailsOnTheServer).
//
// ZooKeeper 3.8 itself loses or diverges committed data when members are
// killed in quick succession (ZOOKEEPER-4646, -4643, -4785): in a run that
// killed a member every few seconds, deleted nodes came back (queue items
// delivered again after their ack, an old rwlock node owned by a live
// session wedging the lock), with the servers' digest mismatch counters
// up. A member is now killed only once the last one restarted has synced
// (testkit.Ensemble.WaitSynced) and a second has passed. The servers
// still reported digest mismatches after some follower restarts, one to
// three times in most 5-minute runs and in about one 15-second run in
// four; the suite logs after which kills they grew, and the count at the
// end, beside its checks. A killed member now restarts without its data
// (testkit.Ensemble.RestartEmpty) and syncs from the leader by a
// snapshot, not by the DIFF that 3.8.0 gets wrong (ZOOKEEPER-4785 is one
// such bug): since then no run has diverged (below).
//
// 5-minute runs at the code as committed (2026-11-25, -chaos.duration=5m,
// every fault kind injected 25–27 times): CHAOS_SEED=11, 22 and 33 passed
// every check, each with 0 violations, 51,000–55,000 lock holds, 6,700–
// 7,400 leadership terms and 30,000–36,000 queue items checked. In each the
// servers' digest mismatch counters grew after two to five follower
// restarts (they count from each server's start, so the figure at the end
// can be lower than the sum).
//
// The barrier reports, 2026-11-26: of fourteen 5-minute runs the day
// before, three failed. Seed 303 (before the double-barrier fix above) and
// seed 707 (after it) reported "barrier1 through Leave ... while barrier0,
// entered ..., had not started to leave", about a second after the faults
// stopped, and in 303 the four barrier members made no progress after it;
// CI's 15-second run failed the same way (seed 4957142606886285557, in a
// run where no Enter or Leave had failed). Every one of those runs
// had diverged servers (seed 707: 886 and 883 digest mismatches at the
// end; CI's: 965). A member on a diverged follower can read member nodes
// the leader deleted long before (deleted nodes came back in the runs
// above): counted, they complete a round that lacks a member, whose node
// then comes after the others listed the round, and they leave without
// it; a watch on such a node never fires, so its watchers wait for good.
// That is a likely cause, not one seen node by node. Three replays of
// CI's seed with the old restarts passed; one of them diverged (1,918
// mismatches). With the members restarted empty, seeds 707, 909 and 303
// ran 5 minutes each (60, 41 and 41 kills): every check passed, and no
// server diverged, where each of the day's earlier 5-minute runs had
// diverged one to three times.
//
// It is not the only cause: a later CI-loop run, with the members
// restarted empty, reported it again with no divergence (seed
// 6158452962645425645, 15 s, 0 digest mismatches, no Enter or Leave
// failed: "barrier2 through Leave ... while barrier0, entered 9 ms before,
// had not started to leave"). Four replays of that seed passed. Likely
// causes, found by reading (2026-11-26), all fixed: a watch event carries
// no zxid before ZooKeeper 3.9, so it does not move the session's last
// seen zxid, and a member whose connection moved after an event may read
// from a server that has not applied the event's change yet.
//   - A member let through Enter by ready's event could make its first
//     Leave listing on such a server, without ready and the members made
//     just before it: the round it read left them out, and it went through
//     Leave without them. A first listing must now show ready, or the
//     member syncs and lists again (transcript leave_listing_behind_ready).
//   - A member's first look in Enter, read from such a server, could miss
//     a round in progress without it (it was counted out of it): it
//     joined, and passed on that round's ready, uncounted. A member's
//     ready is now one made with or after its node; one made before it
//     (its event comes before the reply to our create) makes the member
//     withdraw its node and wait the round out (transcript
//     ready_before_our_join_reply).
//   - A member's own request for ready, sent before it passed on another
//     member's ready, could land after the round was over and leave a
//     ready that lets the next round's members through early. Ready is
//     now made only in a multi that checks the member's node exists.
//
// None was caught in the act. Of 115 runs of CI's length that day, the
// first 45 mostly before these fixes and the other 70 after the first,
// none reported the barrier again, but one of the first 45 (seed
// 1558110683595198527, one Enter failed with a lost session) had all four
// barrier members stop after 22 rounds, which a round torn as above would
// explain too.
//
// Seen again on 2026-11-27, twice in 14 two-minute runs (seeds
// 3998605928269903165 and 3898898833975800463, 0 digest mismatches). The
// second, with the report's new detail: "barrier2 through Enter at
// 02:02:06.463877 with only [barrier1 barrier2 barrier3] able to be in;
// the others' last Enter before: barrier0 called 02:02:06.378175, returned
// 02:02:06.461940 (barrier: session lost)". barrier0's Enter failed 2 ms
// before barrier2 passed. A ready is made only when a fresh listing shows
// every member's node, so barrier0's node was most likely counted before
// its session ended, and barrier2 learnt of the ready after that end. The
// check counted a member whose Enter failed only up to its failure, and
// asked for every member at the moment of the pass, which no barrier can
// promise (a member may die just after the round is complete). It now
// asks for a moment between the Enter's call and its return at which
// every member could be in (TestBarrierLedgerCountsAMemberLostAfterTheRoundWasComplete):
// barrier2's report above is such a case if the other three were in
// before barrier0's failure at 02:02:06.461 (the report did not give when
// they called Enter), and the check no longer makes it then.
//
// Seed 707's other report (twice): a lock hold, and a leadership term, of
// five seconds while the others took the lock (or led) many times, each in
// a run that gave up one session-closed fault ("session closes given up:
// 1"; expire blocks and cuts the client, then waits up to 5 s for its
// handles to publish SUSPENDED with no term open). A likely cause, found
// by reading the contention machine and fixed: a waiter granted on a reply
// or watch event read before the cut but handled after SUSPENDED held while
// cut off, past its session's end on the server, until LOST (transcript
// no_grant_while_suspended, which fails on the old code). Not confirmed by
// a replay: seed 707 passed with and without the fix since.
package chaos
