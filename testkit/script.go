package testkit

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Script is a zk.Conn with no ZooKeeper behind it: every request the code
// under test makes waits until the test answers it, and the test decides
// every reply, watch event and session event. It drives a recipe's state
// machine through exactly the inputs a test wants, in the order it wants
// (a reply lost, a watch firing before a reply, a session expiring between
// two requests), which no server can be made to do on purpose.
//
// The test takes requests with Next, in the order it chooses among those
// pending, and answers each with one of Call's reply methods. Everything
// taken, answered and fired is written to the transcript, which Golden
// compares with a file. Lifecycle events are not in it (they come on their
// own goroutine): wait for them with a Recorder.
type Script struct {
	t testing.TB

	mu      sync.Mutex
	pending []*Call
	taken   []*Call       // taken by Next, not answered yet
	arrived chan struct{} // closed and replaced when a request arrives
	lines   []string
	uuids   map[string]string // uuid -> <uuid-N>, in order of appearance
	session int64
	state   zk.SessionState
	subs    map[int]func(zk.SessionEvent)
	nextSub int
	watches []*Call // answered calls whose watch has not fired
}

// NewScript returns a connected Script with session id 1.
func NewScript(t testing.TB) *Script {
	return &Script{t: t, arrived: make(chan struct{}), uuids: map[string]string{}, session: 1, state: zk.StateConnected, subs: map[int]func(zk.SessionEvent){}}
}

// Call is one request of the code under test, taken by Next. Its fields say
// what was asked; answer it with exactly one of Created, CreatedSeq,
// Children, Exists, Missing, Node, OK or Fail, then fire its watch, if it
// asked for one, with Fire.
type Call struct {
	Op      OpKind
	Path    string
	Data    []byte
	Mode    zk.CreateMode
	Version int32
	Ops     []zk.Op // a multi's operations
	Watch   bool    // ExistsW, GetW or ChildrenW

	s       *Script
	reply   chan callReply
	watch   chan zk.WatchEvent
	watched bool // a watch was left (the reply left one)
}

type callReply struct {
	name     string
	names    []string
	data     []byte
	stat     zk.Stat
	exists   bool
	results  []zk.OpResult
	err      error
	watching bool
}

// Next waits for a pending request of kind op on path (any op's path, for
// a multi), takes it and writes it to the transcript. A path that ends in
// "*" matches every path that starts with what comes before it (a
// sequential node's name has a random uuid in it).
// It fails the test, printing the transcript and what is pending, if none
// comes within the testkit's deadline.
func (s *Script) Next(op OpKind, path string) *Call {
	s.t.Helper()
	timer := time.NewTimer(waitDeadline)
	defer timer.Stop()
	for {
		s.mu.Lock()
		i := slices.IndexFunc(s.pending, func(c *Call) bool { return c.matches(op, path) })
		if i >= 0 {
			c := s.pending[i]
			s.pending = slices.Delete(s.pending, i, i+1)
			s.taken = append(s.taken, c)
			s.writeLocked("-> " + c.String())
			s.mu.Unlock()
			return c
		}
		arrived := s.arrived
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-timer.C:
			s.t.Fatalf("testkit: no %s request on %q within %v; pending: %v\ntranscript:\n%s", op, path, waitDeadline, s.Pending(), s.Transcript())
		}
	}
}

// Pending lists the requests waiting to be taken, in arrival order.
func (s *Script) Pending() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.pending))
	for i, c := range s.pending {
		out[i] = s.normalize(c.String())
	}
	return out
}

// Transcript is every line written so far, one per request taken, reply
// given, watch fired and session event, with each uuid in a path replaced
// by <uuid-N> in order of appearance (a recipe's uuids are random).
func (s *Script) Transcript() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n") + "\n"
}

// Note writes a line of the test's own to the transcript.
func (s *Script) Note(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeLocked("# " + line)
}

// Session moves the connection to state and tells its subscribers, as the
// client does: SUSPENDED, RECONNECTED (same session), CONNECTED. For a
// session's end use Expire.
func (s *Script) Session(state zk.SessionState) {
	s.mu.Lock()
	s.state = state
	s.writeLocked("session " + state.String())
	ev := zk.SessionEvent{State: state, SessionID: s.session}
	s.mu.Unlock()
	s.emit(ev)
}

// Expire ends the session as a server that timed it out does: LOST with
// the old session id, every watch left ends with EventNotWatching and
// zk.ErrSessionExpired, then CONNECTED with the next session id. Pending
// requests stay pending (a client sends them on the new session).
func (s *Script) Expire() {
	s.mu.Lock()
	s.writeLocked("session LOST (expired)")
	lost := zk.SessionEvent{State: zk.StateLost, SessionID: s.session}
	s.session++
	s.state = zk.StateConnected
	s.mu.Unlock()
	s.emit(lost)
	s.mu.Lock()
	s.endWatchesLocked(zk.ErrSessionExpired)
	s.writeLocked("session CONNECTED")
	connected := zk.SessionEvent{State: zk.StateConnected, SessionID: s.session}
	s.mu.Unlock()
	s.emit(connected)
}

// emit calls the subscribers, in the order they subscribed, outside the
// lock (one may ask the Script for its state).
func (s *Script) emit(ev zk.SessionEvent) {
	s.mu.Lock()
	keys := slices.Sorted(maps.Keys(s.subs))
	fns := make([]func(zk.SessionEvent), len(keys))
	for i, k := range keys {
		fns[i] = s.subs[k]
	}
	s.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

func (s *Script) endWatchesLocked(err error) {
	for _, c := range s.watches {
		c.watch <- zk.WatchEvent{Type: zk.EventNotWatching, Path: c.Path, Err: err}
		close(c.watch)
	}
	s.watches = nil
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func (s *Script) normalize(line string) string {
	return uuidRE.ReplaceAllStringFunc(line, func(u string) string {
		if n, ok := s.uuids[u]; ok {
			return n
		}
		n := fmt.Sprintf("<uuid-%d>", len(s.uuids)+1)
		s.uuids[u] = n
		return n
	})
}

func (s *Script) writeLocked(line string) { s.lines = append(s.lines, s.normalize(line)) }

func (c *Call) matches(op OpKind, pattern string) bool {
	if c.Op != op {
		return false
	}
	match := func(p string) bool { return p == pattern }
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		match = func(p string) bool { return strings.HasPrefix(p, prefix) }
	}
	if c.Op != OpMulti {
		return match(c.Path)
	}
	return slices.ContainsFunc(multiPaths(c.Ops), match)
}

func multiPaths(ops []zk.Op) []string {
	var out []string
	for _, op := range ops {
		if p, ok := zk.OpPath(op); ok {
			out = append(out, p)
		}
	}
	return out
}

// String says what the call asked, as the transcript shows it.
func (c *Call) String() string {
	if c.Op == OpMulti {
		parts := make([]string, len(c.Ops))
		for i, op := range c.Ops {
			switch o := op.(type) {
			case *zk.CreateOp:
				parts[i] = "create " + o.Path
			case *zk.DeleteOp:
				parts[i] = "delete " + o.Path
			case *zk.SetOp:
				parts[i] = fmt.Sprintf("set %s %q", o.Path, o.Data)
			case *zk.CheckOp:
				parts[i] = "check " + o.Path
			}
		}
		return "multi [" + strings.Join(parts, ", ") + "]"
	}
	s := string(c.Op) + " " + c.Path
	switch {
	case c.Op == OpCreate:
		s += fmt.Sprintf(" %q", c.Data)
	case c.Op == OpSet:
		s += fmt.Sprintf(" %q", c.Data)
	case c.Watch:
		s += " watch"
	}
	return s
}

func (c *Call) answer(line string, r callReply) {
	c.s.t.Helper()
	c.s.mu.Lock()
	i := slices.Index(c.s.taken, c)
	if i < 0 {
		c.s.mu.Unlock()
		c.s.t.Fatalf("testkit: %s answered twice, or after Close", c.s.normalize(c.String()))
		return
	}
	c.s.taken = slices.Delete(c.s.taken, i, i+1)
	c.s.writeLocked("<- " + line)
	if c.Watch && r.watching {
		c.watched = true
		c.s.watches = append(c.s.watches, c)
	}
	c.s.mu.Unlock()
	c.reply <- r
}

// Created answers a create with the node's name (for a sequential create,
// see CreatedSeq).
func (c *Call) Created(name string) { c.answer("created "+name, callReply{name: name}) }

// CreatedSeq answers a sequential create with the requested path followed
// by the 10-digit sequence number seq.
func (c *Call) CreatedSeq(seq int32) { c.Created(fmt.Sprintf("%s%010d", c.Path, seq)) }

// Children answers Children or ChildrenW with names and the parent's stat;
// a ChildrenW leaves its watch.
func (c *Call) Children(stat zk.Stat, names ...string) {
	c.answer(fmt.Sprintf("children %v", names), callReply{names: slices.Clone(names), stat: stat, watching: true})
}

// Exists answers Exists or ExistsW: the node exists with stat (a data
// watch is left).
func (c *Call) Exists(stat zk.Stat) {
	c.answer(fmt.Sprintf("exists czxid=%d", stat.Czxid), callReply{stat: stat, exists: true, watching: true})
}

// Missing answers Exists or ExistsW: the node does not exist (an ExistsW
// leaves a watch for its creation).
func (c *Call) Missing() { c.answer("missing", callReply{watching: true}) }

// Node answers Get or GetW with the node's data and stat.
func (c *Call) Node(data []byte, stat zk.Stat) {
	c.answer(fmt.Sprintf("data %q czxid=%d", data, stat.Czxid), callReply{data: data, stat: stat, watching: true})
}

// OK answers a delete, set, sync or multi with success (a multi's results
// name each op's path).
func (c *Call) OK() {
	var res []zk.OpResult
	for _, p := range multiPaths(c.Ops) {
		res = append(res, zk.OpResult{Path: p})
	}
	c.answer("ok", callReply{results: res})
}

// Fail answers the call with err: a server error (zk.ErrNoNode,
// zk.ErrNodeExists, ...) or zk.ErrConnectionLoss for a reply lost on the
// way (pair it with Session(zk.StateSuspended) and Session(zk.StateReconnected)
// as a client sees it). No watch is left.
func (c *Call) Fail(err error) { c.answer("error "+err.Error(), callReply{err: err}) }

// Fire delivers the event typ to the watch the call left; it fails the
// test if the call left none or it fired already.
func (c *Call) Fire(typ zk.EventType) {
	c.s.t.Helper()
	c.s.mu.Lock()
	i := slices.Index(c.s.watches, c)
	if i < 0 {
		c.s.mu.Unlock()
		c.s.t.Fatalf("testkit: %s left no watch to fire (or it fired)", c.s.normalize(c.String()))
		return
	}
	c.s.watches = slices.Delete(c.s.watches, i, i+1)
	c.s.writeLocked(fmt.Sprintf("fire %s %s", typ, c.Path))
	c.s.mu.Unlock()
	c.watch <- zk.WatchEvent{Type: typ, Path: c.Path}
	close(c.watch)
}

// call queues a request and waits for its answer or ctx's end.
func (s *Script) call(ctx context.Context, c *Call) (callReply, error) {
	c.s = s
	c.reply = make(chan callReply, 1)
	if c.Watch {
		c.watch = make(chan zk.WatchEvent, 1)
	}
	s.mu.Lock()
	if s.state == zk.StateClosed {
		s.mu.Unlock()
		return callReply{}, zk.ErrClosed
	}
	s.pending = append(s.pending, c)
	close(s.arrived)
	s.arrived = make(chan struct{})
	s.mu.Unlock()
	select {
	case r := <-c.reply:
		return r, r.err
	case <-ctx.Done():
		s.mu.Lock()
		i := slices.Index(s.pending, c)
		if i >= 0 {
			s.pending = slices.Delete(s.pending, i, i+1)
		}
		s.mu.Unlock()
		if i >= 0 {
			return callReply{}, ctx.Err()
		}
		r := <-c.reply // taken already: the test answers it
		return r, r.err
	}
}

func (c *Call) watchChan() <-chan zk.WatchEvent {
	if c.watched {
		return c.watch
	}
	return nil
}

// Create is zk.Conn's.
func (s *Script) Create(ctx context.Context, path string, data []byte, mode zk.CreateMode) (string, error) {
	return s.CreateACL(ctx, path, data, mode, nil)
}

// CreateACL is zk.Conn's; the script records the call as a create (the
// ACL is the server's business).
func (s *Script) CreateACL(ctx context.Context, path string, data []byte, mode zk.CreateMode, _ []zk.ACL) (string, error) {
	r, err := s.call(ctx, &Call{Op: OpCreate, Path: path, Data: data, Mode: mode})
	return r.name, err
}

// Delete is zk.Conn's.
func (s *Script) Delete(ctx context.Context, path string, version int32) error {
	_, err := s.call(ctx, &Call{Op: OpDelete, Path: path, Version: version})
	return err
}

// Exists is zk.Conn's.
func (s *Script) Exists(ctx context.Context, path string) (zk.Stat, bool, error) {
	r, err := s.call(ctx, &Call{Op: OpExists, Path: path})
	return r.stat, r.exists, err
}

// ExistsW is zk.Conn's.
func (s *Script) ExistsW(ctx context.Context, path string) (zk.Stat, bool, <-chan zk.WatchEvent, error) {
	c := &Call{Op: OpExists, Path: path, Watch: true}
	r, err := s.call(ctx, c)
	return r.stat, r.exists, c.watchChan(), err
}

// Get is zk.Conn's.
func (s *Script) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	r, err := s.call(ctx, &Call{Op: OpGet, Path: path})
	return r.data, r.stat, err
}

// GetW is zk.Conn's.
func (s *Script) GetW(ctx context.Context, path string) ([]byte, zk.Stat, <-chan zk.WatchEvent, error) {
	c := &Call{Op: OpGet, Path: path, Watch: true}
	r, err := s.call(ctx, c)
	return r.data, r.stat, c.watchChan(), err
}

// Children is zk.Conn's.
func (s *Script) Children(ctx context.Context, path string) ([]string, zk.Stat, error) {
	r, err := s.call(ctx, &Call{Op: OpChildren, Path: path})
	return r.names, r.stat, err
}

// ChildrenW is zk.Conn's.
func (s *Script) ChildrenW(ctx context.Context, path string) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	c := &Call{Op: OpChildren, Path: path, Watch: true}
	r, err := s.call(ctx, c)
	return r.names, r.stat, c.watchChan(), err
}

// Set is zk.Conn's.
func (s *Script) Set(ctx context.Context, path string, data []byte, version int32) (zk.Stat, error) {
	r, err := s.call(ctx, &Call{Op: OpSet, Path: path, Data: data, Version: version})
	return r.stat, err
}

// Multi is zk.Conn's.
func (s *Script) Multi(ctx context.Context, ops ...zk.Op) ([]zk.OpResult, error) {
	r, err := s.call(ctx, &Call{Op: OpMulti, Ops: ops})
	return r.results, err
}

// Sync is zk.Conn's.
func (s *Script) Sync(ctx context.Context, path string) error {
	_, err := s.call(ctx, &Call{Op: "sync", Path: path})
	return err
}

// SessionID is zk.Conn's.
func (s *Script) SessionID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == zk.StateClosed {
		return 0
	}
	return s.session
}

// State is zk.Conn's.
func (s *Script) State() zk.SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Subscribe is zk.Conn's. Subscribers are called on the goroutine that
// calls Session or Expire.
func (s *Script) Subscribe(fn func(zk.SessionEvent)) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.nextSub
	s.nextSub++
	s.subs[k] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, k)
	}
}

// Close is zk.Conn's: pending requests, and those taken but not answered,
// fail with zk.ErrClosed, and watches end with EventNotWatching. Later
// calls do nothing.
func (s *Script) Close() error {
	s.mu.Lock()
	if s.state == zk.StateClosed {
		s.mu.Unlock()
		return nil
	}
	s.state = zk.StateClosed
	for _, c := range slices.Concat(s.pending, s.taken) {
		c.reply <- callReply{err: zk.ErrClosed}
	}
	s.pending, s.taken = nil, nil
	s.endWatchesLocked(zk.ErrClosed)
	ev := zk.SessionEvent{State: zk.StateClosed, SessionID: s.session}
	s.mu.Unlock()
	s.emit(ev)
	return nil
}

// Golden compares got with the file testdata/<name>.golden of the test's
// package and fails t when they differ. With `go test -update` (a flag the
// test package declares: `var _ = flag.Bool("update", false, "...")`) or
// ZK_UPDATE_GOLDEN=1 it writes the file instead.
func Golden(t testing.TB, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if goldenUpdate() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update or ZK_UPDATE_GOLDEN=1 to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run with -update after checking):\n%s", name, file, got)
	}
}

func goldenUpdate() bool {
	if os.Getenv("ZK_UPDATE_GOLDEN") == "1" {
		return true
	}
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}
