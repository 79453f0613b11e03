package zk

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The resync hold: a guard against a data race in go-zookeeper v1.0.4.
//
// After it resumes a session on a new connection, go-zookeeper starts its
// send and receive loops and then, in its connection loop, builds the
// setWatches request that re-registers its watches, reading its last zxid
// (conn.go:614) without synchronising with the receive loop, which writes
// it for every reply (conn.go:849). Any reply that reaches the receive loop
// before the setWatches frame is on the wire races with that read: requests
// left in go-zookeeper's queue at the cut, requests issued while
// disconnected, and requests issued at RECONNECTED, which the adapter
// reports before go-zookeeper builds setWatches. (Replies read after the
// setWatches frame was written are ordered after the read through the write
// and read system calls, which is also how the race detector sees it.)
//
// The dialer therefore hands go-zookeeper a resyncConn. It reads the frames
// go-zookeeper writes, one whole frame per Write: first the handshake
// (ConnectRequest), then request frames {length int32, xid int32, opcode
// int32, body}. When the handshake resumes a session and the adapter may
// have a watch registered with go-zookeeper, it holds back every request
// frame until go-zookeeper writes setWatches, then writes setWatches and the
// held frames after it, in their order; from then on frames pass straight
// through. Held frames are acknowledged to go-zookeeper at once, so its send
// loop keeps draining its queue and reaches setWatches, which it queued
// behind them. Pings and auth pass (their replies carry no zxid, and
// go-zookeeper waits for the auth reply before its send loop starts).
//
// If no setWatches comes within resyncGrace (the watches the adapter counted
// had just fired, or their requests had not been answered), go-zookeeper had
// none to re-send, so it read nothing, and the held frames go out then. (A
// connection loop stalled that long before it builds setWatches would still
// race.)
//
// A handshake that opens a session (first connect, after expiry), or
// resumes one while the adapter counts no watch, holds nothing at first:
// go-zookeeper then has no watches and reads nothing, unless a watch request
// is answered on the new connection before its connection loop gets to
// setWatches. Even then the registration orders every earlier reply (and
// its own) before the read; only a reply processed after it and before the
// read races. So such a connection passes frames up to and including the
// first that sets a watch, and then holds the rest as above until
// setWatches, or for resyncGateGrace: go-zookeeper's connection loop builds
// setWatches microseconds after the handshake, and only a loop stalled that
// long would still race. The common case, a loop that found no watch and
// sends no setWatches, costs the requests that follow a new connection's
// first watch request up to resyncGateGrace, once per connection.
const (
	resyncGrace     = 250 * time.Millisecond
	resyncGateGrace = 10 * time.Millisecond
)

// go-zookeeper's wire constants.
const (
	wireXidPing       = -2
	wireOpSetAuth     = 100
	wireOpSetWatches  = 101
	wireOpSetWatches2 = 105 // not sent by go-zookeeper v1.0.4
)

// go-zookeeper's requests that can set a watch: {path string, watch bool}.
const (
	wireOpExists       = 3
	wireOpGetData      = 4
	wireOpGetChildren  = 8
	wireOpGetChildren2 = 12
)

// setsWatch reports whether the whole request frame p, of opcode op, sets
// a watch.
func setsWatch(p []byte, op int32) bool {
	switch op {
	case wireOpExists, wireOpGetData, wireOpGetChildren, wireOpGetChildren2:
	default:
		return false
	}
	if len(p) < 16 {
		return false
	}
	n := int(int32(binary.BigEndian.Uint32(p[12:])))
	return n >= 0 && 16+n < len(p) && p[16+n] != 0
}

// parseRequestFrame reads the header of one whole request frame.
func parseRequestFrame(p []byte) (xid, op int32, ok bool) {
	if len(p) < 12 || int(binary.BigEndian.Uint32(p)) != len(p)-4 {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(p[4:])), int32(binary.BigEndian.Uint32(p[8:])), true
}

// handshakeResumes reads a ConnectRequest frame {length int32,
// protocolVersion int32, lastZxidSeen int64, timeOut int32, sessionId int64,
// passwd buffer} and reports whether it asks to resume a session.
func handshakeResumes(p []byte) (resumes, ok bool) {
	if len(p) < 28 || int(binary.BigEndian.Uint32(p)) != len(p)-4 {
		return false, false
	}
	return binary.BigEndian.Uint64(p[20:]) != 0, true
}

// resyncStats counts what the resync holds of a Conn did, for tests.
type resyncStats struct {
	held      atomic.Int64 // connections that held request frames back from the handshake on
	rewatched atomic.Int64 // holds ended by setWatches
	expired   atomic.Int64 // holds ended by resyncGrace
	unread    atomic.Int64 // frames that could not be read (ending a hold)
	gated     atomic.Int64 // connections that held request frames back from their first watch request on
	gateEnded atomic.Int64 // of those, holds ended by resyncGateGrace
}

// resyncConn is the connection go-zookeeper writes to; see resyncGrace.
type resyncConn struct {
	net.Conn
	watching func() bool
	grace    time.Duration // of a hold from the handshake on
	gate     time.Duration // of a hold from the first watch request on
	stats    *resyncStats

	// passing is set once frames go straight through; it is written under
	// mu, and a Write that reads it set needs no lock.
	passing atomic.Bool

	mu         sync.Mutex
	handshaken bool
	gated      bool        // no hold yet: passing frames until the first watch request
	gating     bool        // the hold began at the first watch request
	held       []byte      // request frames acknowledged but not yet sent
	timer      *time.Timer // ends the hold after grace (or gate)
}

// newResyncConn wraps conn. watching reports whether a watch may be
// registered with go-zookeeper; it is asked once, at the handshake. grace
// and gate are resyncGrace and resyncGateGrace outside tests.
func newResyncConn(conn net.Conn, watching func() bool, grace, gate time.Duration, stats *resyncStats) *resyncConn {
	return &resyncConn{Conn: conn, watching: watching, grace: grace, gate: gate, stats: stats}
}

func (r *resyncConn) Write(p []byte) (int, error) {
	if r.passing.Load() {
		return r.Conn.Write(p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.passing.Load() { // resyncGrace ended the hold meanwhile
		return r.Conn.Write(p)
	}
	if !r.handshaken {
		r.handshaken = true
		resumes, ok := handshakeResumes(p)
		switch {
		case !ok:
			r.passing.Store(true)
		case resumes && r.watching():
			r.stats.held.Add(1)
			r.timer = time.AfterFunc(r.grace, r.expire)
		default:
			r.gated = true
		}
		return r.Conn.Write(p)
	}
	xid, op, ok := parseRequestFrame(p)
	if r.gated {
		switch {
		case !ok, op == wireOpSetWatches, op == wireOpSetWatches2:
			// go-zookeeper is past its read, or we cannot follow.
			r.pass()
		case setsWatch(p, op):
			r.gated, r.gating = false, true
			r.stats.gated.Add(1)
			r.timer = time.AfterFunc(r.gate, r.expire)
		}
		return r.Conn.Write(p)
	}
	switch {
	case ok && (xid == wireXidPing || op == wireOpSetAuth):
		return r.Conn.Write(p)
	case ok && op != wireOpSetWatches && op != wireOpSetWatches2:
		r.held = append(r.held, p...) // go-zookeeper reuses p
		return len(p), nil
	}
	// setWatches goes first; a frame that cannot be read keeps its place.
	var buf []byte
	if ok {
		if !r.gating {
			r.stats.rewatched.Add(1)
		}
		buf = append(append(make([]byte, 0, len(p)+len(r.held)), p...), r.held...)
	} else {
		r.stats.unread.Add(1)
		buf = append(r.held, p...)
	}
	r.pass()
	if _, err := r.Conn.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// expire ends a hold that saw no setWatches within resyncGrace.
func (r *resyncConn) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.passing.Load() {
		return
	}
	if r.gating {
		r.stats.gateEnded.Add(1)
	} else {
		r.stats.expired.Add(1)
	}
	held := r.held
	r.pass()
	if len(held) > 0 {
		if _, err := r.Conn.Write(held); err != nil {
			// go-zookeeper was told they were sent: make its receive loop
			// fail, which fails them with a connection loss.
			r.Conn.Close()
		}
	}
}

// pass ends the hold, or the gate; r.mu is held.
func (r *resyncConn) pass() {
	r.gated = false
	r.held = nil
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.passing.Store(true)
}

// Close closes the connection first, so that a write blocked under r.mu
// ends, then drops what is held.
func (r *resyncConn) Close() error {
	err := r.Conn.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pass()
	return err
}

// watchCount counts the watches go-zookeeper may have registered for this
// Conn, erring high: a watch request counts from before it is sent, and a
// watch until the adapter has received its event (go-zookeeper drops a
// watcher in the same critical section in which it delivers the event). A
// request begun after a connection with a session was lost cannot have
// been answered before the next connection with a session; such requests
// ("fresh") do not count until that connection is lost in turn.
type watchCount struct {
	mu      sync.Mutex
	live    bool   // the connection has a session: requests may be answered
	gen     uint64 // connections with a session lost so far
	armed   int    // forwarders waiting for their watch's event
	pending int    // watch requests unanswered, begun before the last loss
	fresh   int    // watch requests unanswered, begun since
}

// begin registers a watch request about to be sent; pass what it returns
// to end.
func (w *watchCount) begin() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fresh++
	return w.gen
}

// end records the answer to the request begun at gen: armed when
// go-zookeeper returned a watch channel (call fired when its event has been
// received).
func (w *watchCount) end(gen uint64, armed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == w.gen {
		w.fresh--
	} else {
		w.pending--
	}
	if armed {
		w.armed++
	}
}

func (w *watchCount) fired() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed--
}

// connected is called when go-zookeeper reports a session on a new
// connection, before it starts sending requests on it.
func (w *watchCount) connected() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live = true
}

// lost is called when go-zookeeper reports a connection gone, which it does
// once the connection's receive loop has ended.
func (w *watchCount) lost() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.live {
		return
	}
	w.live = false
	w.gen++
	w.pending += w.fresh
	w.fresh = 0
}

// any reports whether go-zookeeper may hold a watch now.
func (w *watchCount) any() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.armed+w.pending > 0
}
