package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Leftovers are what a recipe still had to delete when it was closed: its
// nodes, made on one session. A recipe's actor stops at Close; its
// leftovers outlive it in the connection's janitor (HandOver).
type Leftovers struct {
	Session int64    // the session the nodes were made on
	Nodes   []string // nodes to delete; one already gone counts as deleted
	// Prefixes are the protected prefixes (dir/_c_<uuid>-...) of creates
	// whose reply never came: every child of the prefix's directory whose
	// name starts with the prefix's base is ours and is deleted.
	Prefixes []string
}

func (l Leftovers) empty() bool { return len(l.Nodes) == 0 && len(l.Prefixes) == 0 }

// HandOver gives l to conn's janitor, which deletes the nodes for as long
// as their session lives: at once, and again after a connection loss —
// when the same session reconnects, or at once if the session still looks
// connected (a server's timeout) — until every delete succeeded. When
// the session ends (expiry, a new session, the connection closed), the
// server has deleted them itself (recipes' nodes are ephemeral), and the
// janitor lets them go. The channel is closed once either has happened.
//
// A connection has at most one janitor, and only while it has leftovers:
// its goroutine ends once they are done.
func HandOver(conn zk.Conn, l Leftovers) <-chan struct{} {
	done := make(chan struct{})
	if l.empty() || l.Session == 0 || conn.SessionID() != l.Session {
		close(done) // nothing to delete, or its session is already over
		return done
	}
	janitorsMu.Lock()
	defer janitorsMu.Unlock()
	j := janitors[conn]
	if j == nil {
		j = &janitor{conn: conn, wake: make(chan struct{}, 1)}
		janitors[conn] = j
		j.cancel = conn.Subscribe(j.sessionChanged)
		go j.run()
	}
	j.mu.Lock()
	j.jobs = append(j.jobs, job{Leftovers: l, done: done})
	j.mu.Unlock()
	j.poke()
	return done
}

var (
	janitorsMu sync.Mutex
	janitors   = make(map[zk.Conn]*janitor)
)

type janitor struct {
	conn   zk.Conn
	cancel func() // the session subscription
	wake   chan struct{}

	mu     sync.Mutex
	jobs   []job
	gone   map[int64]bool // sessions seen to end
	closed bool           // the connection was closed
}

type job struct {
	Leftovers
	done chan struct{}
}

func (j *janitor) poke() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// sessionChanged runs on the connection's goroutine: it only records and
// wakes the janitor.
func (j *janitor) sessionChanged(ev zk.SessionEvent) {
	j.mu.Lock()
	switch ev.State {
	case zk.StateLost:
		if j.gone == nil {
			j.gone = make(map[int64]bool)
		}
		j.gone[ev.SessionID] = true
	case zk.StateClosed:
		j.closed = true
	}
	j.mu.Unlock()
	j.poke()
}

// run tries every job whenever it is woken (a new job, a session change,
// a loss the session's state did not show) while the connection is up, and
// ends when no job is left.
func (j *janitor) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range j.wake {
		tried := j.connected()
		if tried {
			j.settle(func(l Leftovers) Leftovers { return j.attempt(ctx, l) })
		} else {
			j.settle(nil) // drop the jobs whose session ended; wait for a connection
		}
		janitorsMu.Lock()
		j.mu.Lock()
		idle := len(j.jobs) == 0
		j.mu.Unlock()
		if idle {
			delete(janitors, j.conn)
			janitorsMu.Unlock()
			j.cancel()
			return
		}
		janitorsMu.Unlock()
		if tried && j.connected() {
			// A connection loss while the session still looks connected
			// is tried again now: after a server's operation or request
			// timeout (the outcome is unknown) no session change follows.
			// After a real loss not shown yet, the retry waits in the
			// client for the connection, or fails once SUSPENDED shows
			// and then waits here for the reconnect.
			j.poke()
		}
	}
}

// connected reports whether requests can reach the server now.
func (j *janitor) connected() bool {
	s := j.conn.State()
	return s == zk.StateConnected || s == zk.StateReconnected
}

// settle drops the jobs whose session is over and applies try, if any, to
// the others, dropping those left with nothing to do.
func (j *janitor) settle(try func(Leftovers) Leftovers) {
	j.mu.Lock()
	jobs := j.jobs
	j.jobs = nil
	j.mu.Unlock()
	var keep []job
	for _, jb := range jobs {
		if !j.sessionOver(jb.Session) && try != nil {
			jb.Leftovers = try(jb.Leftovers)
		}
		if j.sessionOver(jb.Session) || jb.empty() {
			close(jb.done)
			continue
		}
		keep = append(keep, jb)
	}
	j.mu.Lock()
	j.jobs = append(keep, j.jobs...)
	j.mu.Unlock()
}

func (j *janitor) sessionOver(id int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || j.gone[id] || j.conn.State() == zk.StateClosed {
		return true
	}
	now := j.conn.SessionID()
	return now != 0 && now != id
}

// attempt deletes what it can of l and returns what is left: what a
// connection loss stopped, for the next reconnect. Any other answer is
// final: gone already (NoNode), or nothing a retry would change. The
// deletes go out together, so that all of them (a node and its hold mark)
// are done within one round trip; only a lost create's prefix takes two
// more, to sync and list its directory first.
func (j *janitor) attempt(ctx context.Context, l Leftovers) Leftovers {
	var left Leftovers
	left.Session = l.Session
	for _, p := range l.Prefixes {
		dir := zk.Parent(p)
		// The lost create may not be applied yet on the server read
		// from: the sync makes it catch up, so the listing shows it.
		err := j.conn.Sync(ctx, dir)
		var kids []string
		if err == nil {
			kids, _, err = j.conn.Children(ctx, dir)
		}
		switch {
		case errors.Is(err, zk.ErrConnectionLoss):
			left.Prefixes = append(left.Prefixes, p)
		case err != nil: // the directory is gone, or nothing can be done
		default:
			for _, k := range kids {
				if strings.HasPrefix(k, zk.Base(p)) {
					l.Nodes = append(l.Nodes, zk.Join(dir, k))
				}
			}
		}
	}
	lost := make([]bool, len(l.Nodes))
	var wg sync.WaitGroup
	for i, n := range l.Nodes {
		wg.Go(func() {
			lost[i] = errors.Is(j.conn.Delete(ctx, n, zk.AnyVersion), zk.ErrConnectionLoss)
		})
	}
	wg.Wait()
	for i, n := range l.Nodes {
		if lost[i] {
			left.Nodes = append(left.Nodes, n)
		}
	}
	return left
}
