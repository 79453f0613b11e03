// Package testkit is what zkrecipes' tests stand on: two ZooKeepers behind
// one contract, and the faults to throw at them.
//
// # Targets
//
// A Target is a ZooKeeper a behavioural test runs against, with fault verbs
// (Disconnect, Reconnect, Expire, LoseNextReply, HoldNextReply) that return
// once the connection has seen what they cause. ForEachTarget runs a test on
// each target as subtests "sim" and "zk"; the same assertions must hold on
// both, and where they differ one of them is wrong. TestMain should be
// Main, which stops the shared real server and checks for leaked goroutines:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
//	func TestLockSurvivesDisconnect(t *testing.T) {
//		testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
//			c := tg.Connect(t)
//			...
//			tg.Disconnect(t, c)
//			tg.Reconnect(t, c)
//		})
//	}
//
// # The simulator
//
// NewSim is the in-memory ZooKeeper 3.8 of package testkit/sim (see its
// doc), with a Target for ForEachTarget-style tests: one standalone server
// seen through go-zookeeper and our adapter, as docs/zk-semantics.md
// describes them, with no goroutines and no timers. Programs (the demo, the
// benchmarks) import testkit/sim itself: it links no testing package.
//
// Faults are small verbs: Disconnect and Reconnect (SUSPENDED, requests
// wait, then RECONNECTED and the watches replayed from the last zxid the
// conn saw), Expire (the ephemerals go; LOST, then CONNECTED with a new
// session, as go-zookeeper does), LoseNextReply and HoldNextReply,
// LateNextWrite (a write lost and applied only after the conn's next read,
// as when a client reconnects to a server behind the leader: code that
// syncs before it looks for its lost write finds it), and ReapContainers (one pass of the server's reaper; WithAutoReap reaps at
// once). SetSequence moves a parent's counter, to test wrap-around. Sim's
// Target is the "sim" of ForEachTarget; conformance_test.go runs one table
// of ZooKeeper behaviours on it and on a real server, and where they differ
// the simulator is the one to fix.
//
// # Testing your own code
//
// Record records a recipe handle's lifecycle events (any handle: they all
// have Subscribe) for the rest of the test. WaitFor and Expect wait for
// them in order, 15 s each, and on failure print the recording, one line
// per event, so that a failed assertion shows what the recipe lived
// through:
//
//	l, _ := lock.New(conn, "/app/lock")
//	rec := testkit.Record(t, l)
//	g, _ := l.Acquire(ctx)
//	sim.Expire(conn) // conn from sim.Connect()
//	<-g.Lost()
//	rec.Expect(t, events.ElectedComplete, events.Lost)
//
// The examples of this package are such tests: a leader that stops when
// its session expires, a worker that releases a lock when its ctx ends, an
// item delivered again after its consumer crashed.
//
// # A real ZooKeeper
//
// StartServer starts a standalone Apache ZooKeeper (Debian's
// libzookeeper-java jars, run with java) on 127.0.0.1 with a free port and a
// throw-away data directory, and stops it when the test ends; StartEnsemble
// starts three servers whose members a test can Kill and Restart (or
// RestartEmpty, which avoids a sync that ZooKeeper 3.8.0 can get wrong
// after a kill). Both are built on package testkit/zkserver, which links
// no testing package: programs (zkr server, benchmarks) use it.
//
// Test servers run with a 200 ms tick, so sessions can be as short as
// 400 ms (two ticks; 1–2 s is a good choice) and expire at most one tick
// after their timeout; forceSync is off. When java or the jars are missing,
// tests that need a server are skipped, unless ZK_REQUIRED=1, which makes
// that a failure (CI sets it; scripts/test.sh installs the package when run
// as root). A server's JVM dies with the test binary, however the binary
// ends (Linux).
//
// # The proxy
//
// Proxy (package testkit/proxy, which links no testing package either)
// sits between a client and a real server and speaks just enough of
// ZooKeeper's framing to pick out one request: it cuts connections, turns
// into a black hole, drops the reply to a chosen request (the classic "was
// my create applied?" case) or holds it back, and closes a given session on
// the server (ExpireSession). EnsembleProxy puts one in front of each
// member of an ensemble and drives them as one: a client connects to its
// Addrs, Carrier says which member carries a session now, and Block, Cut
// and ExpireSession act on the whole ensemble. The "zk" target drives its
// faults through one Proxy per connection.
package testkit
