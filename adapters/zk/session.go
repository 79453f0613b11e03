package zk

import (
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// tracker turns go-zookeeper's connection states into session states.
//
// go-zookeeper reports the TCP connection (Disconnected, Connecting,
// Connected) and the handshake (HasSession, Expired), and after an expiry
// it opens a new session on its own. What a recipe needs to know is whether
// its session is certainly alive (CONNECTED, RECONNECTED), maybe alive
// (SUSPENDED) or certainly gone (LOST), so the tracker compares session ids:
//
//	Disconnected after a session          → SUSPENDED (same id)
//	HasSession with the same id           → RECONNECTED
//	Expired                               → LOST (the old id)
//	HasSession with another id            → LOST (the old id, unless Expired
//	                                        already said so), then CONNECTED
//	the first HasSession                  → CONNECTED
//
// Everything else (dial attempts, a repeated Disconnected) changes nothing.
type tracker struct {
	state SessionState
	sid   int64 // the session the connection has now; 0 when it has none
	last  int64 // the last session id the connection had
}

// apply advances the tracker by one go-zookeeper state; id is the
// connection's session id at that moment (only read for HasSession). It
// returns the session events to publish, in order.
func (t *tracker) apply(s gozk.State, id int64, now time.Time) []SessionEvent {
	var out []SessionEvent
	emit := func(st SessionState, sid int64) {
		t.state = st
		out = append(out, SessionEvent{State: st, SessionID: sid, Time: now})
	}
	switch s {
	case gozk.StateHasSession:
		switch {
		case t.last == 0 || t.state == StateLost:
			emit(StateConnected, id)
		case id == t.last:
			if t.state == StateSuspended {
				emit(StateReconnected, id)
			}
		default:
			emit(StateLost, t.last)
			emit(StateConnected, id)
		}
		t.sid, t.last = id, id
	case gozk.StateDisconnected:
		if t.state == StateConnected || t.state == StateReconnected {
			emit(StateSuspended, t.sid)
		}
	case gozk.StateExpired:
		if t.last != 0 && t.state != StateLost {
			emit(StateLost, t.last)
			t.sid = 0
		}
	}
	return out
}

// subscriber is one Subscribe call; active is cleared by its cancel func.
type subscriber struct {
	fn     func(SessionEvent)
	active atomic.Bool
}

// onEvent is the go-zookeeper event callback. It runs on go-zookeeper's
// goroutines (session states come from its connection loop, one at a time;
// node events and the ends of watches from its receive loop, in the
// server's order), and gives node events to their watches (inOrder). It
// never calls into go-zookeeper except for SessionID, an atomic load.
func (c *client) onEvent(ev gozk.Event) {
	if ev.Type != gozk.EventSession {
		c.order.fire(ev)
		return
	}
	switch ev.State {
	case gozk.StateHasSession:
		c.watches.connected()
	case gozk.StateDisconnected:
		c.watches.lost()
	}
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	var id int64
	if ev.State == gozk.StateHasSession {
		// c.gz is set: Connect holds c.mu until it is, and go-zookeeper
		// cannot finish a handshake before Connect has returned it.
		id = c.gz.SessionID()
	}
	first := c.track.last == 0
	out := c.track.apply(ev.State, id, time.Now())
	established := first && c.track.last != 0
	subs := c.subs
	c.mu.Unlock()
	if established {
		close(c.connected)
	}
	deliver(subs, out)
}

// deliver calls every active subscriber with every event, in order. The
// caller holds c.deliverMu, which keeps deliveries in order across the
// goroutines that publish (go-zookeeper's loop, and Close).
func deliver(subs []*subscriber, evs []SessionEvent) {
	for _, ev := range evs {
		for _, s := range subs {
			if s.active.Load() {
				s.fn(ev)
			}
		}
	}
}

// Subscribe calls fn for every session state change from now on, in order,
// until the returned cancel func is called (a call already under way may
// still finish after cancel returns). fn runs on the connection's own
// goroutine, or on Close's caller for CLOSED: it must return quickly and must
// not call back into the Conn, since the connection waits for it. CLOSED is
// the last event; subscribers are dropped after it.
func (c *client) Subscribe(fn func(SessionEvent)) (cancel func()) {
	if c == nil || fn == nil {
		return func() {}
	}
	s := &subscriber{fn: fn}
	s.active.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return func() {}
	}
	// Copy on write: deliveries iterate over a snapshot without the lock.
	c.subs = append(c.subs[:len(c.subs):len(c.subs)], s)
	return func() {
		s.active.Store(false)
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.subs {
			if x == s {
				c.subs = append(c.subs[:i:i], c.subs[i+1:]...)
				break
			}
		}
	}
}

// SessionID is the id of the session the connection has now: kept while
// SUSPENDED (the session may still be alive), 0 from LOST until the next
// CONNECTED and after Close.
func (c *client) SessionID() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0
	}
	return c.track.sid
}

// State is the current session state; StateClosed from the moment Close is
// called.
func (c *client) State() SessionState {
	if c == nil {
		return StateClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return StateClosed
	}
	return c.track.state
}
