package testkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// FaultKind names a kind of fault that Faults injects.
type FaultKind string

// The kinds of fault Faults injects on the simulator.
const (
	// FaultDisconnect cuts a connection, then reconnects it (same session)
	// after a pause.
	FaultDisconnect FaultKind = "disconnect"
	// FaultExpire ends a connection's session, as the server does when it
	// stops hearing from it (its ephemeral nodes go; it gets a new one).
	FaultExpire FaultKind = "expire"
	// FaultLoseReply loses the reply to a connection's next request of a
	// random kind: the request is applied, the caller sees a connection
	// loss.
	FaultLoseReply FaultKind = "lose-reply"
	// FaultDelay holds back the reply to a connection's next request of a
	// random kind, and everything after it on that connection, for a pause.
	FaultDelay FaultKind = "delay"
	// FaultLateWrite loses the reply to a connection's next write of a
	// random kind and applies the write only after the connection's next
	// read, unless a write or a sync comes first (see Sim.LateNextWrite):
	// a server behind the leader, after a reconnect.
	FaultLateWrite FaultKind = "late-write"
)

// FaultKinds are every kind Faults knows, in the order they are listed.
var FaultKinds = []FaultKind{FaultDisconnect, FaultExpire, FaultLoseReply, FaultDelay, FaultLateWrite}

// FaultSeedEnv is the environment variable that replays a schedule: when it
// is set, NewFaults takes its seed from it.
const FaultSeedEnv = "ZK_FAULT_SEED"

// Faults is a seeded schedule of random faults on a simulator's connections:
// the user's chaos test. Run injects them until its ctx ends; the seed is
// logged when the schedule is made, and again if the test fails, so a
// failing run can be replayed with ZK_FAULT_SEED. The same seed gives the
// same faults, in the same order, on the same connections, with the same
// pauses; what the code under test does between them is up to the
// scheduler.
type Faults struct {
	sim      *Sim
	seed     int64
	kinds    []FaultKind
	interval [2]time.Duration // between two faults
	pause    [2]time.Duration // a disconnect's or a delay's length

	mu     sync.Mutex
	rng    *rand.Rand
	counts map[FaultKind]int
}

// FaultsOption configures NewFaults.
type FaultsOption func(*Faults)

// WithFaultSeed sets the schedule's seed (ZK_FAULT_SEED, when set, wins, so
// that a failure can be replayed without editing the test).
func WithFaultSeed(seed int64) FaultsOption { return func(f *Faults) { f.seed = seed } }

// WithFaultKinds limits the schedule to kinds (default: FaultKinds).
func WithFaultKinds(kinds ...FaultKind) FaultsOption {
	return func(f *Faults) { f.kinds = slices.Clone(kinds) }
}

// WithFaultInterval sets the range of the time between two faults
// (default 5–50 ms).
func WithFaultInterval(min, max time.Duration) FaultsOption {
	return func(f *Faults) { f.interval = [2]time.Duration{min, max} }
}

// WithFaultPause sets the range of a disconnect's and a delay's length
// (default 1–20 ms).
func WithFaultPause(min, max time.Duration) FaultsOption {
	return func(f *Faults) { f.pause = [2]time.Duration{min, max} }
}

// NewFaults makes a schedule of faults on sim's connections. Its seed is
// ZK_FAULT_SEED if set, else WithFaultSeed's, else the clock's; it is logged
// now and again if t fails.
func NewFaults(t testing.TB, sim *Sim, opts ...FaultsOption) *Faults {
	t.Helper()
	f := &Faults{
		sim:      sim,
		seed:     time.Now().UnixNano(),
		kinds:    FaultKinds,
		interval: [2]time.Duration{5 * time.Millisecond, 50 * time.Millisecond},
		pause:    [2]time.Duration{time.Millisecond, 20 * time.Millisecond},
		counts:   make(map[FaultKind]int),
	}
	for _, o := range opts {
		o(f)
	}
	if s := os.Getenv(FaultSeedEnv); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("testkit: %s=%q is not an integer", FaultSeedEnv, s)
		}
		f.seed = seed
	}
	if len(f.kinds) == 0 {
		t.Fatalf("testkit: NewFaults with no fault kinds")
	}
	for _, k := range f.kinds {
		if !slices.Contains(FaultKinds, k) {
			t.Fatalf("testkit: unknown fault kind %q", k)
		}
	}
	for _, r := range [][2]time.Duration{f.interval, f.pause} {
		if r[0] <= 0 || r[1] < r[0] {
			t.Fatalf("testkit: fault duration range %v–%v: want 0 < min <= max", r[0], r[1])
		}
	}
	f.rng = rand.New(rand.NewPCG(uint64(f.seed), 0))
	t.Logf("faults: seed %d (replay: %s=%d)", f.seed, FaultSeedEnv, f.seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("faults: the failing run's seed was %d (replay: %s=%d); injected %s", f.seed, FaultSeedEnv, f.seed, f)
		}
	})
	return f
}

// Seed is the schedule's seed.
func (f *Faults) Seed() int64 { return f.seed }

// Counts says how many faults of each kind were injected so far.
func (f *Faults) Counts() map[FaultKind]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[FaultKind]int, len(f.counts))
	for k, n := range f.counts {
		out[k] = n
	}
	return out
}

// String lists the counts, in FaultKinds' order.
func (f *Faults) String() string {
	counts := f.Counts()
	s := ""
	for _, k := range FaultKinds {
		if n := counts[k]; n > 0 {
			s += fmt.Sprintf("%s=%d ", k, n)
		}
	}
	if s == "" {
		return "no fault"
	}
	return s[:len(s)-1]
}

// plannedFault is one step of the schedule.
type plannedFault struct {
	wait  time.Duration // before it
	kind  FaultKind
	conn  int           // index into Run's conns
	op    OpKind        // FaultLoseReply and FaultDelay
	pause time.Duration // FaultDisconnect and FaultDelay
}

// fired reports whether r was taken by a request.
func fired(r *ReplyFault) bool {
	select {
	case <-r.Fired():
		return true
	default:
		return false
	}
}

// replyKinds are the requests a reply fault picks from; writeKinds, those
// a late write does.
var (
	replyKinds = []OpKind{OpCreate, OpDelete, OpExists, OpGet, OpChildren, OpSet, OpMulti}
	writeKinds = slices.DeleteFunc(slices.Clone(replyKinds), func(op OpKind) bool { return !op.Write() })
)

// next draws the next step of the schedule for n connections.
func (f *Faults) next(n int) plannedFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	between := func(r [2]time.Duration) time.Duration {
		return r[0] + time.Duration(f.rng.Int64N(int64(r[1]-r[0])+1))
	}
	p := plannedFault{wait: between(f.interval), kind: f.kinds[f.rng.IntN(len(f.kinds))], conn: f.rng.IntN(n)}
	p.op = replyKinds[f.rng.IntN(len(replyKinds))]
	if p.kind == FaultLateWrite {
		p.op = writeKinds[f.rng.IntN(len(writeKinds))]
	}
	p.pause = between(f.pause)
	return p
}

// Run injects faults into conns (connections of f's simulator) until ctx
// ends, then heals them: a cut connection is reconnected, a held reply
// released, an armed fault that no request took disarmed. It returns when
// all of them are healed. Run may be called again, on the same or other
// connections; the schedule goes on where it stopped.
func (f *Faults) Run(ctx context.Context, conns ...zk.Conn) {
	if len(conns) == 0 {
		<-ctx.Done()
		return
	}
	var (
		armed   []*ReplyFault
		pending sync.WaitGroup // disconnects and delays waiting to be healed
	)
	heal := make(chan struct{}) // closed when ctx ends: every pause ends at once
	defer func() {
		close(heal)
		pending.Wait()
		for _, a := range armed {
			a.Disarm()
		}
	}()
	after := func(d time.Duration, fn func()) {
		pending.Add(1)
		go func() {
			defer pending.Done()
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-heal:
			}
			fn()
		}()
	}
	for {
		p := f.next(len(conns))
		t := time.NewTimer(p.wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		c := conns[p.conn]
		switch p.kind {
		case FaultDisconnect:
			f.sim.Disconnect(c)
			after(p.pause, func() { f.sim.Reconnect(c) })
		case FaultExpire:
			f.sim.Expire(c)
		case FaultLoseReply:
			armed = slices.DeleteFunc(armed, fired)
			armed = append(armed, f.sim.LoseNextReply(c, p.op, "/"))
		case FaultDelay:
			r := f.sim.HoldNextReply(c, p.op, "/")
			after(p.pause, r.Release)
		case FaultLateWrite:
			armed = slices.DeleteFunc(armed, fired)
			armed = append(armed, f.sim.LateNextWrite(c, p.op, "/"))
		}
		f.mu.Lock()
		f.counts[p.kind]++
		f.mu.Unlock()
	}
}
