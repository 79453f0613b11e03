package zk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// TestCutsWithWatchesAndRequestsInFlight cuts a connection that has watches
// armed while many requests are being issued, again and again. At each
// reconnect go-zookeeper finds requests queued ahead of its setWatches and
// sends them first; their replies update its lastZxid while setWatches has
// read it unsynchronised. Under -race, without the adapter's resync hold
// (see resync.go), this fails with a data race in go-zookeeper within a few
// cuts (20 runs of 20 on a 2-core box; 12 of 20 with a gate on calls alone,
// which cannot stop what is already in go-zookeeper's queue).
func TestCutsWithWatchesAndRequestsInFlight(t *testing.T) {
	addr := needServer(t)
	p := newProxy(t, addr)
	c := connect(t, p.Addr(), WithSessionTimeout(4*time.Second))
	other := connect(t, addr)
	ctx := testCtx(t, 60*time.Second)
	root := testRoot(t, c)
	rec := record(t, c)
	sid := c.SessionID()

	_, _, children, err := c.ChildrenW(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	_, _, flag, err := c.ExistsW(ctx, root+"/flag")
	if err != nil {
		t.Fatal(err)
	}

	// Load: workers issue reads without pause; a read cut short by a cut
	// (ErrConnectionLoss) is issued again, and waits for the next
	// connection in go-zookeeper's queue.
	const workers = 32
	stop := make(chan struct{})
	failed := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := c.Get(ctx, root); err != nil && !errors.Is(err, ErrConnectionLoss) {
					failed <- err
					return
				}
			}
		}()
	}
	const cuts = 20
	for i := range cuts {
		p.Cut()
		for _, ev := range rec.expect(t, eventWait, StateSuspended, StateReconnected) {
			if ev.SessionID != sid {
				t.Fatalf("cut %d: %v for session %x, want %x", i, ev.State, ev.SessionID, sid)
			}
		}
		// Cut only once the connection has carried a request.
		if err := c.Sync(ctx, "/"); err != nil {
			t.Fatalf("cut %d: Sync: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Fatalf("Get under cuts: %v", err)
	}
	// Every reconnect held its requests until setWatches was written.
	st := &c.(*client).dialer.stats
	held, rewatched, expired, unread := st.held.Load(), st.rewatched.Load(), st.expired.Load(), st.unread.Load()
	t.Logf("resync holds: %d, ended by setWatches %d, by the grace %d, unreadable frames %d", held, rewatched, expired, unread)
	if held != cuts || rewatched != cuts || expired != 0 || unread != 0 {
		t.Fatalf("resync holds %d, ended by setWatches %d, by the grace %d, unreadable frames %d; want %d, %d, 0, 0",
			held, rewatched, expired, unread, cuts, cuts)
	}

	// The watches survived every cut, re-registered each time.
	noWatch(t, children)
	noWatch(t, flag)
	if _, err := other.Create(ctx, root+"/flag", nil, ModePersistent); err != nil {
		t.Fatal(err)
	}
	if ev := waitWatch(t, flag, eventWait); ev != (WatchEvent{Type: EventNodeCreated, Path: root + "/flag"}) {
		t.Fatalf("exists watch after the cuts: %+v", ev)
	}
	if ev := waitWatch(t, children, eventWait); ev != (WatchEvent{Type: EventNodeChildrenChanged, Path: root}) {
		t.Fatalf("children watch after the cuts: %+v", ev)
	}
}

// TestResyncHoldsOnlyWithAWatchArmed checks the watch count against the
// real client: a resumed session is held only while a watch is armed.
func TestResyncHoldsOnlyWithAWatchArmed(t *testing.T) {
	p := newProxy(t, needServer(t))
	c := connect(t, p.Addr(), WithSessionTimeout(4*time.Second))
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)
	rec := record(t, c)
	st := &c.(*client).dialer.stats
	cut := func(step string, held int64) {
		t.Helper()
		p.Cut()
		rec.expect(t, eventWait, StateSuspended, StateReconnected)
		if err := c.Sync(ctx, "/"); err != nil {
			t.Fatalf("%s: Sync: %v", step, err)
		}
		if st.held.Load() != held || st.rewatched.Load() != held || st.expired.Load() != 0 {
			t.Fatalf("%s: holds %d, ended by setWatches %d, by the grace %d; want %d, %d, 0",
				step, st.held.Load(), st.rewatched.Load(), st.expired.Load(), held, held)
		}
	}
	cut("no watch", 0)

	// Resumed with no watch counted: the connection's first watch request
	// starts a gate (see resyncGateGrace), and what follows still runs.
	gated := st.gated.Load()
	_, _, w, err := c.ExistsW(ctx, root+"/x")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.gated.Load(); got != gated+1 {
		t.Fatalf("gates after the first watch request of a connection: %d, want %d", got, gated+1)
	}
	if _, err := c.Create(ctx, root+"/x", nil, ModePersistent); err != nil {
		t.Fatal(err)
	}
	if ev := waitWatch(t, w, eventWait); ev.Type != EventNodeCreated {
		t.Fatalf("watch: %+v", ev)
	}
	cut("a watch that fired", 0)

	if _, _, _, err := c.GetW(ctx, root+"/x"); err != nil {
		t.Fatal(err)
	}
	cut("a watch armed", 1)
	if _, _, _, err := c.GetW(ctx, root+"/missing"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("GetW of a missing node: %v", err)
	}
	cut("a watch armed and a watch request that left none", 2)
}

// wire is the far side of a resyncConn in the unit tests: it records what
// reaches the socket and signals each write.
type wire struct {
	net.Conn // nil: only Write and Close are used
	mu       sync.Mutex
	frames   [][]byte
	wrote    chan struct{}
	closed   bool
}

func newWire() *wire { return &wire{wrote: make(chan struct{}, 64)} }

func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, net.ErrClosed
	}
	w.frames = append(w.frames, bytes.Clone(p))
	w.wrote <- struct{}{}
	return len(p), nil
}

func (w *wire) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

// sent is everything written so far, in one piece.
func (w *wire) sent() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Join(w.frames, nil)
}

// reqFrame encodes a request frame the way go-zookeeper does:
// {length, xid, opcode, body}.
func reqFrame(xid, op int32, body ...byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(xid))
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	return append(b, body...)
}

// handshakeFrame encodes a ConnectRequest {protocolVersion int32,
// lastZxidSeen int64, timeOut int32, sessionId int64, passwd buffer}.
func handshakeFrame(sid int64) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, 0x1234)
	b = binary.BigEndian.AppendUint32(b, 4000)
	b = binary.BigEndian.AppendUint64(b, uint64(sid))
	b = binary.BigEndian.AppendUint32(b, 16)
	b = append(b, make([]byte, 16)...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

var (
	fGet       = reqFrame(1, 4, 0, 0, 0, 1, '/', 1) // getData "/" watch
	fExists    = reqFrame(2, 3, 0, 0, 0, 1, '/', 0)
	fPing      = reqFrame(wireXidPing, 11)
	fAuth      = reqFrame(3, wireOpSetAuth, 1, 2, 3)
	fWatches   = reqFrame(4, wireOpSetWatches, 9, 9, 9)
	fSync      = reqFrame(5, 9, 0, 0, 0, 1, '/')
	fMalformed = []byte{0, 0, 0, 9, 1, 2, 3} // length says 9, 3 follow
)

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// writeAll writes frames as go-zookeeper does, one per Write, and checks
// that each is acknowledged whole.
func writeAll(t *testing.T, r *resyncConn, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		buf := bytes.Clone(f) // go-zookeeper reuses its buffer: scribble on it after
		if n, err := r.Write(buf); n != len(f) || err != nil {
			t.Fatalf("Write(%x) = %d, %v", f, n, err)
		}
		clear(buf)
	}
}

func TestParseFrames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		frame   []byte
		xid, op int32
		ok      bool
	}{
		{"getData", fGet, 1, 4, true},
		{"ping", fPing, -2, 11, true},
		{"setWatches", fWatches, 4, 101, true},
		{"close", reqFrame(7, -11), 7, -11, true},
		{"short", fGet[:11], 0, 0, false},
		{"length mismatch", fMalformed, 0, 0, false},
		{"two frames in one write", cat(fGet, fSync), 0, 0, false},
	} {
		xid, op, ok := parseRequestFrame(tc.frame)
		if xid != tc.xid || op != tc.op || ok != tc.ok {
			t.Errorf("%s: parseRequestFrame = %d, %d, %v; want %d, %d, %v", tc.name, xid, op, ok, tc.xid, tc.op, tc.ok)
		}
	}
	for _, tc := range []struct {
		name          string
		frame         []byte
		resumes, okay bool
	}{
		{"new session", handshakeFrame(0), false, true},
		{"resumed session", handshakeFrame(0x1020304050), true, true},
		{"short", handshakeFrame(7)[:27], false, false},
		{"length mismatch", append(handshakeFrame(7), 0), false, false},
	} {
		if resumes, ok := handshakeResumes(tc.frame); resumes != tc.resumes || ok != tc.okay {
			t.Errorf("%s: handshakeResumes = %v, %v; want %v, %v", tc.name, resumes, ok, tc.resumes, tc.okay)
		}
	}
}

func TestResyncHoldsRequestsUntilSetWatches(t *testing.T) {
	w := newWire()
	var st resyncStats
	r := newResyncConn(w, func() bool { return true }, time.Hour, time.Hour, &st)
	writeAll(t, r, handshakeFrame(42), fGet, fPing, fAuth, fExists)
	// Pings and auth pass; requests wait.
	if got, want := w.sent(), cat(handshakeFrame(42), fPing, fAuth); !bytes.Equal(got, want) {
		t.Fatalf("before setWatches the wire has\n%x\nwant\n%x", got, want)
	}
	// setWatches goes first, the held requests after it in their order,
	// and from then on everything passes.
	writeAll(t, r, fWatches, fSync)
	if got, want := w.sent(), cat(handshakeFrame(42), fPing, fAuth, fWatches, fGet, fExists, fSync); !bytes.Equal(got, want) {
		t.Fatalf("after setWatches the wire has\n%x\nwant\n%x", got, want)
	}
	if !r.passing.Load() || r.timer != nil || r.held != nil {
		t.Fatalf("hold not ended: passing %v, timer %v, held %x", r.passing.Load(), r.timer, r.held)
	}
	if st.held.Load() != 1 || st.rewatched.Load() != 1 || st.expired.Load() != 0 || st.unread.Load() != 0 {
		t.Fatalf("stats held %d rewatched %d expired %d unread %d", st.held.Load(), st.rewatched.Load(), st.expired.Load(), st.unread.Load())
	}
}

// A connection that opens a session, or resumes one with no watch counted,
// holds nothing until its first watch request: that one passes, and what
// follows waits for setWatches (go-zookeeper found the watch the request
// armed) or for the gate's grace (it found none).
func TestResyncGatesAfterTheFirstWatchRequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		handshake []byte
		watching  bool
	}{
		{"new session", handshakeFrame(0), true}, // first connect, or after expiry
		{"resumed without watches", handshakeFrame(42), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire()
			var st resyncStats
			r := newResyncConn(w, func() bool { return tc.watching }, time.Hour, time.Hour, &st)
			writeAll(t, r, tc.handshake, fSync, fExists, fGet, fExists, fPing)
			if got, want := w.sent(), cat(tc.handshake, fSync, fExists, fGet, fPing); !bytes.Equal(got, want) {
				t.Fatalf("before setWatches the wire has\n%x\nwant\n%x", got, want)
			}
			writeAll(t, r, fWatches, fSync)
			if got, want := w.sent(), cat(tc.handshake, fSync, fExists, fGet, fPing, fWatches, fExists, fSync); !bytes.Equal(got, want) {
				t.Fatalf("after setWatches the wire has\n%x\nwant\n%x", got, want)
			}
			if st.held.Load() != 0 || st.rewatched.Load() != 0 || st.gated.Load() != 1 || st.gateEnded.Load() != 0 {
				t.Fatalf("held %d, rewatched %d, gated %d, gate ended %d", st.held.Load(), st.rewatched.Load(), st.gated.Load(), st.gateEnded.Load())
			}
		})
	}
	t.Run("gate grace", func(t *testing.T) {
		w := newWire()
		var st resyncStats
		r := newResyncConn(w, func() bool { return false }, time.Hour, 20*time.Millisecond, &st)
		writeAll(t, r, handshakeFrame(0), fGet, fExists)
		<-w.wrote // the handshake
		<-w.wrote // the watch request
		select {
		case <-w.wrote:
		case <-time.After(eventWait):
			t.Fatal("held requests not released after the gate's grace")
		}
		writeAll(t, r, fSync)
		if got, want := w.sent(), cat(handshakeFrame(0), fGet, fExists, fSync); !bytes.Equal(got, want) {
			t.Fatalf("the wire has\n%x\nwant\n%x", got, want)
		}
		if st.gated.Load() != 1 || st.gateEnded.Load() != 1 || st.expired.Load() != 0 {
			t.Fatalf("gated %d, gate ended %d, expired %d", st.gated.Load(), st.gateEnded.Load(), st.expired.Load())
		}
	})
	t.Run("unreadable handshake", func(t *testing.T) {
		w := newWire()
		var st resyncStats
		r := newResyncConn(w, func() bool { return true }, time.Hour, time.Hour, &st)
		writeAll(t, r, handshakeFrame(42)[:20], fGet, fExists, fSync)
		if got, want := w.sent(), cat(handshakeFrame(42)[:20], fGet, fExists, fSync); !bytes.Equal(got, want) {
			t.Fatalf("the wire has\n%x\nwant\n%x", got, want)
		}
		if st.held.Load() != 0 || st.gated.Load() != 0 {
			t.Fatalf("held %d, gated %d", st.held.Load(), st.gated.Load())
		}
	})
}

func TestSetsWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"getData watch", fGet, true},
		{"exists no watch", fExists, false},
		{"getChildren watch", reqFrame(6, wireOpGetChildren, 0, 0, 0, 2, '/', 'a', 1), true},
		{"getChildren2 no watch", reqFrame(6, wireOpGetChildren2, 0, 0, 0, 2, '/', 'a', 0), false},
		{"sync", fSync, false},
		{"truncated path", reqFrame(6, wireOpExists, 0, 0, 0, 9, '/'), false},
		{"negative length", reqFrame(6, wireOpExists, 0xff, 0xff, 0xff, 0xff, 1), false},
	} {
		_, op, _ := parseRequestFrame(tc.frame)
		if got := setsWatch(tc.frame, op); got != tc.want {
			t.Errorf("%s: setsWatch = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestResyncGraceReleasesHeldRequests(t *testing.T) {
	w := newWire()
	var st resyncStats
	r := newResyncConn(w, func() bool { return true }, 20*time.Millisecond, time.Hour, &st)
	writeAll(t, r, handshakeFrame(42), fGet, fExists)
	<-w.wrote // the handshake
	// No setWatches comes (go-zookeeper had no watch left): after the grace
	// the held requests go out, in one write.
	select {
	case <-w.wrote:
	case <-time.After(eventWait):
		t.Fatal("held requests not released after the grace")
	}
	if got, want := w.sent(), cat(handshakeFrame(42), fGet, fExists); !bytes.Equal(got, want) {
		t.Fatalf("the wire has\n%x\nwant\n%x", got, want)
	}
	writeAll(t, r, fWatches, fSync)
	if got, want := w.sent(), cat(handshakeFrame(42), fGet, fExists, fWatches, fSync); !bytes.Equal(got, want) {
		t.Fatalf("after the grace the wire has\n%x\nwant\n%x", got, want)
	}
	if st.held.Load() != 1 || st.expired.Load() != 1 || st.rewatched.Load() != 0 {
		t.Fatalf("stats held %d expired %d rewatched %d", st.held.Load(), st.expired.Load(), st.rewatched.Load())
	}
}

func TestResyncUnreadableFrameEndsTheHoldInOrder(t *testing.T) {
	w := newWire()
	var st resyncStats
	r := newResyncConn(w, func() bool { return true }, time.Hour, time.Hour, &st)
	writeAll(t, r, handshakeFrame(42), fGet, fMalformed, fSync)
	if got, want := w.sent(), cat(handshakeFrame(42), fGet, fMalformed, fSync); !bytes.Equal(got, want) {
		t.Fatalf("the wire has\n%x\nwant\n%x", got, want)
	}
	if st.unread.Load() != 1 || !r.passing.Load() || r.timer != nil {
		t.Fatalf("unread %d, passing %v, timer %v", st.unread.Load(), r.passing.Load(), r.timer)
	}
}

func TestResyncCloseDropsHeldRequests(t *testing.T) {
	w := newWire()
	var st resyncStats
	r := newResyncConn(w, func() bool { return true }, time.Hour, time.Hour, &st)
	writeAll(t, r, handshakeFrame(42), fGet)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.timer != nil || r.held != nil || !w.closed {
		t.Fatalf("after Close: timer %v, held %x, closed %v", r.timer, r.held, w.closed)
	}
	if _, err := r.Write(fSync); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if got, want := w.sent(), handshakeFrame(42); !bytes.Equal(got, want) {
		t.Fatalf("the wire has\n%x\nwant\n%x", got, want)
	}
}

func TestWatchCount(t *testing.T) {
	var w watchCount
	check := func(step string, want bool) {
		t.Helper()
		if got := w.any(); got != want {
			t.Fatalf("%s: any() = %v, want %v", step, got, want)
		}
	}
	w.connected()
	check("none", false)
	g := w.begin()
	w.lost() // a watch request in flight when the connection went
	check("request in flight at a loss", true)
	w.end(g, false) // it failed: no watch
	check("request failed", false)

	fresh := w.begin() // begun while disconnected: cannot be answered yet
	check("request begun after the loss", false)
	w.lost() // a failed dial: no session, nothing could be answered
	check("after a failed dial", false)
	w.connected()
	w.end(fresh, true) // answered on the new connection with a watch
	check("watch armed", true)
	w.fired()
	check("watch fired", false)

	g = w.begin()
	w.end(g, true)
	w.lost()
	w.connected()
	check("armed watch across a reconnect", true)
	g2 := w.begin()
	w.lost()
	w.connected()
	w.fired()
	check("request still in flight across a reconnect", true)
	w.end(g2, true)
	w.fired()
	check("all done", false)
}
