package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// hold is a grant a participant has, as the checker sees it.
type hold struct {
	who   int
	conn  int
	write bool
	g     *rwlock.Grant
}

// checker records the grants participants get and fails on any that
// breaks the lock's promise: no reader beside another participant's
// writer, no two writers, unless the earlier grant's Lost had closed.
type checker struct {
	mu          sync.Mutex
	live        []hold
	maxReaders  int
	writeTokens []int64 // of write grants, by node sequence
	violations  []string
	snap        func() []string
}

// releasing forgets g before its last Release: from then on another
// participant may hold beside it.
func (c *checker) releasing(g *rwlock.Grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = slices.DeleteFunc(c.live, func(o hold) bool { return o.g == g })
}

// awaitLost waits until every trusted grant on connection conn is lost:
// a session expires only after its client lost the connection for the
// session timeout, and under the default policy its grants end at the
// loss.
func (c *checker) awaitLost(t *testing.T, conn int) {
	c.mu.Lock()
	var on []hold
	for _, h := range c.live {
		if h.conn == conn {
			on = append(on, h)
		}
	}
	c.mu.Unlock()
	for _, h := range on {
		select {
		case <-h.g.Lost():
		case <-time.After(15 * time.Second):
			t.Errorf("a grant on a cut connection was not lost: %s", h.g.Node())
		}
	}
}

func (c *checker) granted(h hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = slices.DeleteFunc(c.live, func(o hold) bool { return o.g.Err() != nil })
	if h.g.Err() != nil {
		return // lost before we looked: it promises nothing
	}
	readers := 0
	for _, o := range c.live {
		if o.g == h.g {
			return // a re-entrant acquire
		}
		if o.who != h.who && (o.write || h.write) {
			c.violations = append(c.violations, fmt.Sprintf("%d (write %t, %s) granted beside %d (write %t, %s); children %v", h.who, h.write, h.g.Node(), o.who, o.write, o.g.Node(), c.snap()))
		}
		if !o.write {
			readers++
		}
	}
	c.live = append(c.live, h)
	if !h.write {
		c.maxReaders = max(c.maxReaders, readers+1)
	} else {
		c.writeTokens = append(c.writeTokens, h.g.Token())
	}
}

// subscribeOn subscribes to both handles of every participant on
// connection conn (participant i is on connection i%conns).
func subscribeOn(rws []*rwlock.RWLock, conn, conns int) []*events.Subscription {
	var subs []*events.Subscription
	for i, rw := range rws {
		if i%conns == conn {
			subs = append(subs, rw.ReadLock().Subscribe(events.WithBuffer(256)), rw.WriteLock().Subscribe(events.WithBuffer(256)))
		}
	}
	return subs
}

// awaitSuspended waits for a SUSPENDED on each subscription, and closes
// them. It runs on a participant's goroutine: it reports, and does not
// stop the test.
func awaitSuspended(t *testing.T, subs []*events.Subscription) {
	timeout := time.After(15 * time.Second)
	for _, sub := range subs {
	wait:
		for {
			select {
			case ev := <-sub.C:
				if ev.Type == events.Suspended {
					break wait
				}
			case <-timeout:
				t.Errorf("no SUSPENDED within 15 s after a cut")
				break wait
			}
		}
		sub.Close()
	}
}

// TestPropertyRandomSteps runs six participants on three connections
// through random acquire, try, release, downgrade and upgrade steps while
// connections are cut and sessions expire, and checks every grant against
// every other one still trusted (checker). Readers must overlap at some
// point, tokens of successive write grants grow, and no node is left
// once everything is closed.
func TestPropertyRandomSteps(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const path = "/rw/property"
		const participants, conns = 6, 3
		steps, wait := 10000, 20*time.Millisecond
		if tg.Name() != "sim" {
			wait = 50 * time.Millisecond
		}
		ctx := ctxT(t)
		var cs []zk.Conn
		for range conns {
			cs = append(cs, tg.Connect(t))
		}
		var chk checker
		chk.snap = func() []string { k, _, _ := cs[0].Children(ctx, path); slices.Sort(k); return k }
		var rws []*rwlock.RWLock
		for i := range participants {
			rws = append(rws, newRW(t, cs[i%conns], path))
		}
		var wg sync.WaitGroup
		var faultMu sync.Mutex // one fault at a time
		var faults, lateWrites atomic.Int32
		sim, onSim := testkit.SimOf(tg)
		perParticipant := steps / participants
		for i, rw := range rws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				var read, write int // holds, as this participant counts them
				var readG, writeG *rwlock.Grant
				// release gives back one of the holds counted in n (of g's
				// lock); before the last, the checker forgets g.
				release := func(n *int, g *rwlock.Grant) {
					l := rw.ReadLock()
					if g == writeG {
						l = rw.WriteLock()
					}
					if *n == 1 {
						chk.releasing(g)
					}
					if l.Release(ctx) == nil {
						*n--
					}
				}
				for step := range perParticipant {
					if onSim && rng.IntN(perParticipant/8) == 0 {
						// On the simulator, one of this participant's writes
						// is applied only after its connection's next read.
						op := []testkit.OpKind{testkit.OpCreate, testkit.OpDelete}[rng.IntN(2)]
						sim.LateNextWrite(cs[i%conns], op, path)
						lateWrites.Add(1)
					}
					if rng.IntN(perParticipant/4) == 0 && i < conns {
						// A fault on this participant's connection: a cut, or
						// a cut then an expiry. Every grant on it is lost.
						faultMu.Lock()
						c := cs[i]
						faults.Add(1)
						// Every handle on the connection hears SUSPENDED before
						// the session may end: a grant made just before the cut
						// and not yet recorded (its Acquire returning) is lost
						// by then, as on a real server, where a session outlives
						// its client's SUSPENDED by a third of its timeout.
						subs := subscribeOn(rws, i, conns)
						tg.Disconnect(t, c)
						awaitSuspended(t, subs)
						chk.awaitLost(t, i)
						if rng.IntN(2) == 0 {
							tg.Expire(t, c)
						} else {
							tg.Reconnect(t, c)
						}
						faultMu.Unlock()
						continue
					}
					if readG != nil && readG.Err() != nil {
						drain(ctx, rw.ReadLock())
						read, readG = 0, nil
					}
					if writeG != nil && writeG.Err() != nil {
						drain(ctx, rw.WriteLock())
						write, writeG = 0, nil
					}
					switch op := rng.IntN(6); {
					case op == 0 || op == 1: // acquire, waiting a little
						l, w := rw.ReadLock(), false
						if op == 1 {
							l, w = rw.WriteLock(), true
						}
						actx, cancel := context.WithTimeout(ctx, wait)
						g, err := l.Acquire(actx)
						cancel()
						switch {
						case err == nil:
							chk.granted(hold{who: i, conn: i % conns, write: w, g: g})
							if w {
								write, writeG = write+1, g
							} else {
								read, readG = read+1, g
							}
						case w && read > 0 && write == 0 && readG.Err() == nil:
							if !errors.Is(err, rwlock.ErrUpgrade) {
								t.Errorf("participant %d step %d: upgrade: %v", i, step, err)
							}
						case w && read > 0 && write == 0 && errors.Is(err, rwlock.ErrUpgrade):
							// The read grant ended during the call (another
							// participant's fault on our shared connection): the
							// refusal was owed when the call looked, and only then.
						case errors.Is(err, context.DeadlineExceeded), errors.Is(err, rwlock.ErrSuspended),
							errors.Is(err, rwlock.ErrSessionLost), errors.Is(err, rwlock.ErrNotHeld):
						default:
							t.Errorf("participant %d step %d: acquire: %v", i, step, err)
						}
					case op == 2: // try either
						l, w := rw.ReadLock(), rng.IntN(2) == 0
						if w {
							l = rw.WriteLock()
						}
						ok, g, err := l.TryAcquire(ctx)
						if ok {
							chk.granted(hold{who: i, conn: i % conns, write: w, g: g})
							if w {
								write, writeG = write+1, g
							} else {
								read, readG = read+1, g
							}
						} else if err != nil && !errors.Is(err, rwlock.ErrUpgrade) && !errors.Is(err, rwlock.ErrSuspended) && !errors.Is(err, rwlock.ErrSessionLost) &&
							!(errors.Is(err, rwlock.ErrNotHeld) && !w && write > 0) { // a downgrade whose write hold a fault on the shared connection just ended
							t.Errorf("participant %d step %d: try: %v", i, step, err)
						}
					case op == 3 && write > 0: // downgrade
						g, err := rw.ReadLock().Acquire(ctx)
						if err == nil {
							chk.granted(hold{who: i, conn: i % conns, write: false, g: g})
							read, readG = read+1, g
							release(&write, writeG)
						}
					default: // release what is held
						if write > 0 {
							release(&write, writeG)
						} else if read > 0 {
							release(&read, readG)
						}
					}
				}
				for read > 0 && rw.ReadLock().Release(ctx) == nil {
					read--
				}
				for write > 0 && rw.WriteLock().Release(ctx) == nil {
					write--
				}
			}()
		}
		wg.Wait()
		for _, v := range chk.violations {
			t.Error(v)
		}
		if chk.maxReaders < 2 {
			t.Errorf("readers never overlapped (max %d)", chk.maxReaders)
		}
		for i := 1; i < len(chk.writeTokens); i++ {
			if chk.writeTokens[i] <= chk.writeTokens[i-1] {
				t.Errorf("write grant %d has token %d after %d", i, chk.writeTokens[i], chk.writeTokens[i-1])
			}
		}
		for _, rw := range rws {
			if err := rw.Close(); err != nil {
				t.Error(err)
			}
		}
		eventually(t, cs[0], path, "no node left after Close", count(0))
		if faults.Load() == 0 {
			t.Error("no fault was injected")
		}
		t.Logf("%d steps, %d faults, %d late writes armed: %d write grants, at most %d readers together", steps, faults.Load(), lateWrites.Load(), len(chk.writeTokens), chk.maxReaders)
	})
}

// drain releases every hold l has left (after a loss: none).
func drain(ctx context.Context, l *rwlock.Lock) {
	for l.Release(ctx) == nil {
	}
}
