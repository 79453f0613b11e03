package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// propModel is what the property test knows of the leases: the ones it
// counts as held, and the largest token granted so far.
type propModel struct {
	t   *testing.T
	max int

	mu         sync.Mutex
	active     map[*semaphore.Lease]int // held, by handle; taken out before Release
	expired    []*semaphore.Lease       // held when their session was expired
	maxGranted int64
	grants     int
	failures   []string
}

func (m *propModel) fail(f string, a ...any) {
	m.failures = append(m.failures, fmt.Sprintf(f, a...))
}

// snapshot is the largest token granted before an acquire starts: its
// node is made after, so its token must be larger.
func (m *propModel) snapshot() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxGranted
}

// granted records leases handle h was granted by an acquire started when
// the largest token was since. At that moment the leases counted as held
// and not yet Lost, with these, must be at most maxLeases.
func (m *propModel) granted(h int, since int64, ls ...*semaphore.Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	held := 0
	for l := range m.active {
		if l.Err() == nil {
			held++
		}
	}
	for _, l := range ls {
		if l.Err() == nil {
			held++
		}
	}
	if held > m.max {
		var who []string
		for l, i := range m.active {
			if l.Err() == nil {
				who = append(who, fmt.Sprintf("h%d:%s", i, zk.Base(l.Node())[39:]))
			}
		}
		for _, l := range ls {
			who = append(who, fmt.Sprintf("new h%d:%s", h, zk.Base(l.Node())[39:]))
		}
		m.fail("%d leases held without a Lost() after a grant to handle %d: more than %d: %v", held, h, m.max, who)
	}
	for _, l := range ls {
		if l.Token() <= since {
			m.fail("token %#x granted after %#x: not growing in grant order", l.Token(), since)
		}
		m.maxGranted = max(m.maxGranted, l.Token())
		m.active[l] = h
		m.grants++
	}
}

// propHandle is one handle of the property test, on its own connection.
type propHandle struct {
	i            int
	s            *semaphore.Semaphore
	c            zk.Conn
	disconnected bool
	cancel       context.CancelFunc // the pending async acquire's
	done         chan struct{}      // closed when it has returned and been recorded
}

// pending reports whether h has an async acquire that has not returned.
func (h *propHandle) pending() bool {
	if h.done == nil {
		return false
	}
	select {
	case <-h.done:
		h.done, h.cancel = nil, nil
		return false
	default:
		return true
	}
}

// stop cancels h's pending acquire and waits until it has returned.
func (h *propHandle) stop() {
	if h.done != nil {
		h.cancel()
		<-h.done
		h.done, h.cancel = nil, nil
	}
}

// TestProperty runs 6 handles, each on its own connection, through random
// acquire / AcquireN / try / release / cancel steps, with disconnects and
// session expiries injected. Never more than maxLeases leases are held
// without a prior Lost(); a grant's token is larger than every token
// granted before its acquire began; every lease of an expired session is
// Lost; once every handle is closed no node is left. 10,000 steps on each
// target.
func TestProperty(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const handles, maxLeases, path = 6, 3, "/sem/property"
		const steps = 10000
		seed := time.Now().UnixNano()
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("seed %d", seed)
			}
		})
		// A budget of their own for the 10,000 steps: a real server's run
		// on a loaded 2-core machine outlasted ctxT's minute.
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		observer := tg.Connect(t)
		m := &propModel{t: t, max: maxLeases, active: make(map[*semaphore.Lease]int)}
		var hs []*propHandle
		for i := range handles {
			c := tg.Connect(t)
			hs = append(hs, &propHandle{i: i, c: c, s: newSem(t, c, path, maxLeases, semaphore.WithID(fmt.Sprintf("h%d", i)))})
		}
		held := func(h *propHandle) []*semaphore.Lease {
			m.mu.Lock()
			defer m.mu.Unlock()
			var out []*semaphore.Lease
			for l, i := range m.active {
				if i == h.i {
					out = append(out, l)
				}
			}
			return out
		}
		startAsync := func(h *propHandle, n int) {
			actx, cancel := context.WithCancel(ctx)
			h.cancel, h.done = cancel, make(chan struct{})
			since := m.snapshot()
			go func() {
				defer close(h.done)
				var ls []*semaphore.Lease
				var err error
				if n == 1 {
					var l *semaphore.Lease
					l, err = h.s.Acquire(actx)
					ls = []*semaphore.Lease{l}
				} else {
					ls, err = h.s.AcquireN(actx, n)
				}
				switch {
				case err == nil:
					m.granted(h.i, since, ls...)
				case errors.Is(err, context.Canceled), errors.Is(err, semaphore.ErrSuspended), errors.Is(err, semaphore.ErrSessionLost):
				default:
					m.mu.Lock()
					m.fail("handle %d: acquire of %d: %v", h.i, n, err)
					m.mu.Unlock()
				}
			}()
		}
		var counts [9]int
		sim, onSim := testkit.SimOf(tg)
		var late []*testkit.ReplyFault
		for range steps {
			h := hs[rng.IntN(handles)]
			switch p := rng.IntN(1000); {
			case p < 250: // Acquire, async
				if !h.pending() {
					startAsync(h, 1)
					counts[0]++
				}
			case p < 300: // AcquireN(2), async
				if !h.pending() {
					startAsync(h, 2)
					counts[1]++
				}
			case p < 500: // TryAcquire, on a connected handle
				if !h.disconnected {
					since := m.snapshot()
					ok, l, err := h.s.TryAcquire(ctx)
					if err != nil && !errors.Is(err, semaphore.ErrSessionLost) {
						t.Fatalf("handle %d: TryAcquire: %v", h.i, err)
					}
					if ok {
						m.granted(h.i, since, l)
					}
					counts[2]++
				}
			case p < 850: // Release a lease held on a connected handle
				var ls []*semaphore.Lease
				for _, o := range hs {
					if !o.disconnected {
						ls = append(ls, held(o)...)
					}
				}
				if len(ls) == 0 {
					continue
				}
				l := ls[rng.IntN(len(ls))]
				m.mu.Lock()
				delete(m.active, l)
				m.mu.Unlock()
				// A lease Lost before, or meanwhile (a disconnect's
				// SUSPENDED reaches its instance after Disconnect
				// returned), is not held: its Lost is closed by then.
				wasLost := l.Err() != nil
				err := l.Release(ctx)
				switch {
				case errors.Is(err, semaphore.ErrNotHeld) && l.Err() == nil:
					t.Fatalf("Release = ErrNotHeld of a lease not Lost")
				case wasLost && !errors.Is(err, semaphore.ErrNotHeld):
					t.Fatalf("Release of a lost lease = %v, want ErrNotHeld", err)
				case err != nil && !errors.Is(err, semaphore.ErrNotHeld):
					t.Fatalf("Release = %v", err)
				}
				counts[3]++
			case p < 900: // cancel a pending acquire
				if h.pending() {
					h.stop()
					counts[4]++
				}
			case p < 980: // disconnect
				if !h.disconnected {
					tg.Disconnect(t, h.c)
					h.disconnected = true
					counts[5]++
				}
			case p < 990: // nothing: the reconnects come below
			case p < 997: // on the simulator, a write applied only after the next read
				if onSim && !h.disconnected {
					op := []testkit.OpKind{testkit.OpCreate, testkit.OpDelete}[rng.IntN(2)]
					late = append(late, sim.LateNextWrite(h.c, op, path))
				}
			default: // expire the session of a connected handle
				if h.disconnected {
					continue
				}
				h.stop()
				m.mu.Lock()
				for l, i := range m.active {
					if i == h.i {
						delete(m.active, l)
						m.expired = append(m.expired, l)
					}
				}
				m.mu.Unlock()
				tg.Expire(t, h.c)
				counts[7]++
			}
			for _, o := range hs { // a disconnect lasts a few steps
				if o.disconnected && rng.IntN(4) == 0 {
					tg.Reconnect(t, o.c)
					o.disconnected = false
					counts[6]++
				}
			}
			m.mu.Lock()
			failed := len(m.failures) > 0
			m.mu.Unlock()
			if failed {
				break
			}
		}
		for _, h := range hs {
			h.stop()
			if h.disconnected {
				tg.Reconnect(t, h.c)
				h.disconnected = false
			}
		}
		for _, f := range late {
			if !f.Disarm() {
				counts[8]++ // taken by a write
			}
		}
		m.mu.Lock()
		failures, grants := m.failures, m.grants
		m.mu.Unlock()
		t.Logf("%d steps: acquire %d, AcquireN %d, try %d, release %d, cancel %d, disconnect %d, reconnect %d, expire %d, late write %d; %d leases granted",
			steps, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6], counts[7], counts[8], grants)
		if len(failures) > 0 {
			t.Fatalf("%d failures, first: %s", len(failures), failures[0])
		}
		if grants < steps/25 { // one in four on an idle machine, one in twelve under a full test run; a missed wakeup (a lease left free while some wait) made it one in twenty-six
			t.Errorf("only %d leases granted in %d steps", grants, steps)
		}
		for _, l := range m.expired {
			select {
			case <-l.Lost():
			case <-ctx.Done():
				t.Fatalf("a lease of an expired session never Lost: %s", l.Node())
			}
		}
		for _, h := range hs {
			if err := h.s.Close(); err != nil {
				t.Errorf("handle %d: Close: %v", h.i, err)
			}
		}
		eventually(t, observer, path, "no lease node left after Close", func(kids []string) bool { return len(kids) == 0 })
	})
}
