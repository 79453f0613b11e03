package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/fault"
)

// simConn is a client of the Sim: what go-zookeeper's *zk.Conn with our
// adapter is to a real server. It keeps its session across disconnects and
// gets a new one after an expiry, like go-zookeeper.
type simConn struct {
	s *Sim

	// Guarded by s.mu.
	session  int64 // 0 once closed
	state    zk.SessionState
	up       chan struct{} // closed unless the conn is cut (SUSPENDED)
	link     *link         // the current connection; replaced when it drops
	lastZxid int64         // the zxid of the last reply received (SetWatches' relZxid)
	watches  map[watchKey][]watcher
	digests  []string          // digest identities added by AddAuth, in order; kept for every session
	faults   []*fault.Reply    // armed, in arming order; some perhaps disarmed since
	late     []lateWrite       // writes lost by LateNextWrite, not applied yet, in order
	holds    []<-chan struct{} // release channels of the replies held now, in request order
	parked   []delivery        // watch events that came after a held reply, held with it
	subs     []subscriber
	nextSub  int
	outbox   []delivery
	queued   bool // in s.pending

	deliverMu sync.Mutex // one goroutine delivers c's outbox at a time
}

type subscriber struct {
	id int
	fn func(zk.SessionEvent)
}

// link is one connection of a conn. When it drops, err is set and down is
// closed: replies still owed on it fail with err.
type link struct {
	down chan struct{}
	err  error
}

func newLink() *link { return &link{down: make(chan struct{})} }

// principal is who c's requests come from now.
func (c *simConn) principal() principal {
	return principal{session: c.session, digests: c.digests}
}

// online reports whether c has a connection, so that notifications reach it.
func (c *simConn) online() bool {
	return c.state == zk.StateConnected || c.state == zk.StateReconnected
}

// drop ends c's current connection: owed replies fail with err, and the
// notifications held behind them are lost, so their watches are armed
// again, for the replay.
func (c *simConn) drop(err error) {
	c.link.err = err
	close(c.link.down)
	c.link = newLink()
	c.holds = nil
	for _, d := range c.parked {
		c.watches[d.key] = append(c.watches[d.key], d.w)
	}
	c.parked = nil
}

// cut drops c's connection and makes it SUSPENDED.
func (c *simConn) cut(err error) {
	c.drop(err)
	c.state = zk.StateSuspended
	c.up = make(chan struct{})
	c.emit(zk.StateSuspended, c.session)
}

// restore reconnects a cut c to its session and replays its watches.
func (c *simConn) restore() {
	c.state = zk.StateReconnected
	close(c.up)
	c.emit(zk.StateReconnected, c.session)
	c.replay()
}

// lateWrite is a write LateNextWrite lost: applied when c's next request
// comes (see call), or before c's session ends.
type lateWrite struct {
	apply func(watch bool) error
	f     *fault.Reply
}

// applyLate applies c's late writes, in order, as the server the write went
// to did before c could hear of it. A lost reply leaves no watch.
func (c *simConn) applyLate() {
	for _, w := range c.late {
		_ = w.apply(false)
		w.f.MarkFired()
	}
	c.late = nil
}

// request describes a request for the fault and frame checks: its kind
// (empty for sync, which no fault matches), its paths, its frame size.
type request struct {
	op    fault.OpKind
	paths []string
	frame int
}

// call runs one request on c. It waits while c is cut, then applies the
// request under the sim's lock with apply, which reports the reply's error
// and registers a watch only if watch is true (a lost reply leaves none).
// The reply then follows the frame limit, an armed fault, and the held
// replies before it.
func (c *simConn) call(ctx context.Context, req request, apply func(watch bool) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := c.s
	s.mu.Lock()
	for c.state == zk.StateSuspended {
		up := c.up
		s.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	if c.state == zk.StateClosed {
		s.mu.Unlock()
		return zk.ErrClosed
	}
	if req.frame > maxClientFrame {
		s.mu.Unlock()
		return zk.ErrRequestTooLarge // what go-zookeeper's "buffer too small" becomes through the adapter
	}
	if req.frame > maxFrame {
		// The server drops the connection unanswered; go-zookeeper redials.
		c.cut(zk.ErrConnectionLoss)
		c.restore()
		s.mu.Unlock()
		s.deliver()
		return fmt.Errorf("%w: request of %d bytes exceeds jute.maxbuffer", zk.ErrConnectionLoss, req.frame)
	}
	// A late write is applied before c's next write or sync (the session's
	// requests are applied in order; a sync makes the server catch up),
	// and after its next read (a server behind answered it).
	if req.op.Write() || req.op == "" {
		c.applyLate()
	}
	f := c.takeFault(req)
	if f != nil && f.Late() {
		c.cut(zk.ErrConnectionLoss)
		c.late = append(c.late, lateWrite{apply: apply, f: f})
		c.restore()
		s.mu.Unlock()
		s.deliver()
		return zk.ErrConnectionLoss
	}
	if f != nil && !f.Hold() {
		c.cut(zk.ErrConnectionLoss)
		_ = apply(false)
		c.applyLate()
		f.MarkFired()
		c.restore()
		s.mu.Unlock()
		s.deliver()
		return zk.ErrConnectionLoss
	}
	wait := slices.Clone(c.holds)
	err := apply(true)
	c.applyLate()
	zxid, l := s.zxid, c.link
	if f != nil {
		// Held from here on: the reply, and what follows it.
		c.holds = append(c.holds, f.Released())
		wait = append(wait, f.Released())
		f.MarkFired()
	}
	if len(wait) == 0 {
		c.saw(zxid)
	}
	s.mu.Unlock()
	s.deliver()
	// What was queued for c before this request, by another goroutine's
	// write that may still be handing it over, comes before the reply, as
	// on the connection (go-zookeeper hands an event to its watch before
	// it reads the next reply).
	c.flush()
	if len(wait) == 0 {
		return err
	}
	for _, ch := range wait {
		select {
		case <-ch:
		case <-l.down:
			return l.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	if c.link == l {
		c.saw(zxid)
	}
	s.mu.Unlock()
	return err
}

// saw records that c received a reply carrying zxid.
func (c *simConn) saw(zxid int64) { c.lastZxid = max(c.lastZxid, zxid) }

// takeFault removes and returns the first fault armed on c that req
// matches. It drops the matching faults disarmed since they were armed.
func (c *simConn) takeFault(req request) *fault.Reply {
	for i := 0; i < len(c.faults); i++ {
		f := c.faults[i]
		if !f.Matches(req.op, req.paths...) {
			continue
		}
		c.faults = slices.Delete(c.faults, i, i+1)
		if f.Take() {
			return f
		}
		i--
	}
	return nil
}

// Create implements zk.Conn.
func (c *simConn) Create(ctx context.Context, path string, data []byte, mode zk.CreateMode) (string, error) {
	return c.CreateACL(ctx, path, data, mode, nil)
}

// CreateACL implements zk.Conn.
func (c *simConn) CreateACL(ctx context.Context, path string, data []byte, mode zk.CreateMode, acl []zk.ACL) (string, error) {
	if err := validateCreate(path, mode); err != nil {
		return "", err
	}
	var name string
	req := request{op: fault.OpCreate, paths: []string{path}, frame: frameHeader + frameCreate(path, data, acl)}
	err := c.call(ctx, req, func(bool) error {
		return c.s.write(func(t *txn) error {
			var err error
			name, err = t.create(path, data, mode, acl, c.principal())
			return err
		})
	})
	if err != nil {
		return "", err
	}
	return name, nil
}

// Delete implements zk.Conn.
func (c *simConn) Delete(ctx context.Context, path string, version int32) error {
	if err := zk.ValidatePath(path); err != nil {
		return err
	}
	req := request{op: fault.OpDelete, paths: []string{path}, frame: frameHeader + frameString(path) + 4}
	return c.call(ctx, req, func(bool) error {
		return c.s.write(func(t *txn) error { return t.delete(path, version, c.principal()) })
	})
}

// Exists implements zk.Conn.
func (c *simConn) Exists(ctx context.Context, path string) (zk.Stat, bool, error) {
	st, ok, _, err := c.exists(ctx, path, false)
	return st, ok, err
}

// ExistsW implements zk.Conn.
func (c *simConn) ExistsW(ctx context.Context, path string) (zk.Stat, bool, <-chan zk.WatchEvent, error) {
	return c.exists(ctx, path, true)
}

func (c *simConn) exists(ctx context.Context, path string, watch bool) (zk.Stat, bool, <-chan zk.WatchEvent, error) {
	if err := zk.ValidatePath(path); err != nil {
		return zk.Stat{}, false, nil, err
	}
	rel := zk.RewriteWatchPath(ctx) // a chroot view's, asked before the request goes out
	var (
		st zk.Stat
		ok bool
		ch <-chan zk.WatchEvent
	)
	req := request{op: fault.OpExists, paths: []string{path}, frame: frameHeader + frameString(path) + 1}
	err := c.call(ctx, req, func(register bool) error {
		n := c.s.nodes[path]
		if n != nil {
			st, ok = n.stat(), true
		}
		if watch && register {
			kind := watchExist
			if ok {
				kind = watchData
			}
			ch = c.watch(path, kind, rel)
		}
		return nil
	})
	if err != nil {
		return zk.Stat{}, false, nil, err
	}
	return st, ok, ch, nil
}

// Get implements zk.Conn.
func (c *simConn) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	data, st, _, err := c.get(ctx, path, false)
	return data, st, err
}

// GetW implements zk.Conn.
func (c *simConn) GetW(ctx context.Context, path string) ([]byte, zk.Stat, <-chan zk.WatchEvent, error) {
	return c.get(ctx, path, true)
}

func (c *simConn) get(ctx context.Context, path string, watch bool) ([]byte, zk.Stat, <-chan zk.WatchEvent, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, zk.Stat{}, nil, err
	}
	rel := zk.RewriteWatchPath(ctx)
	var (
		data []byte
		st   zk.Stat
		ch   <-chan zk.WatchEvent
	)
	req := request{op: fault.OpGet, paths: []string{path}, frame: frameHeader + frameString(path) + 1}
	err := c.call(ctx, req, func(register bool) error {
		n := c.s.nodes[path]
		if n == nil {
			return fmt.Errorf("%w: %s", zk.ErrNoNode, path)
		}
		if err := checkPerm(n, zk.PermRead, c.principal(), path); err != nil {
			return err
		}
		data, st = clone(n.data), n.stat()
		if watch && register {
			ch = c.watch(path, watchData, rel)
		}
		return nil
	})
	if err != nil {
		return nil, zk.Stat{}, nil, err
	}
	return data, st, ch, nil
}

// Children implements zk.Conn.
func (c *simConn) Children(ctx context.Context, path string) ([]string, zk.Stat, error) {
	names, st, _, err := c.children(ctx, path, false)
	return names, st, err
}

// ChildrenW implements zk.Conn.
func (c *simConn) ChildrenW(ctx context.Context, path string) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	return c.children(ctx, path, true)
}

func (c *simConn) children(ctx context.Context, path string, watch bool) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, zk.Stat{}, nil, err
	}
	rel := zk.RewriteWatchPath(ctx)
	var (
		names []string
		st    zk.Stat
		ch    <-chan zk.WatchEvent
	)
	req := request{op: fault.OpChildren, paths: []string{path}, frame: frameHeader + frameString(path) + 1}
	err := c.call(ctx, req, func(register bool) error {
		n := c.s.nodes[path]
		if n == nil {
			return fmt.Errorf("%w: %s", zk.ErrNoNode, path)
		}
		if err := checkPerm(n, zk.PermRead, c.principal(), path); err != nil {
			return err
		}
		names, st = c.s.scramble(n.children), n.stat()
		if watch && register {
			ch = c.watch(path, watchChild, rel)
		}
		return nil
	})
	if err != nil {
		return nil, zk.Stat{}, nil, err
	}
	return names, st, ch, nil
}

// scramble lists names in the Sim's seeded hash order, which stands in for
// the server's hash-set order: stable, unrelated to creation order, and
// never ascending (a sorted outcome is reversed).
func (s *Sim) scramble(set map[string]struct{}) []string {
	type ranked struct {
		rank uint64
		name string
	}
	rs := make([]ranked, 0, len(set))
	for name := range set {
		h := fnv.New64a()
		h.Write([]byte(name))
		x := h.Sum64() ^ s.seed
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		rs = append(rs, ranked{x ^ x>>31, name})
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.name
	}
	if len(names) > 1 && slices.IsSorted(names) {
		slices.Reverse(names)
	}
	return names
}

// Set implements zk.Conn.
func (c *simConn) Set(ctx context.Context, path string, data []byte, version int32) (zk.Stat, error) {
	if err := zk.ValidatePath(path); err != nil {
		return zk.Stat{}, err
	}
	var st zk.Stat
	req := request{op: fault.OpSet, paths: []string{path}, frame: frameHeader + frameSet(path, data)}
	err := c.call(ctx, req, func(bool) error {
		return c.s.write(func(t *txn) error {
			var err error
			st, err = t.set(path, data, version, c.principal())
			return err
		})
	})
	if err != nil {
		return zk.Stat{}, err
	}
	return st, nil
}

// Multi implements zk.Conn. On failure it returns the per-op results (nil
// before the failing op, its error, zk.ErrRuntimeInconsistency after) with
// the failing op's error; when the request itself fails, no results.
func (c *simConn) Multi(ctx context.Context, ops ...zk.Op) ([]zk.OpResult, error) {
	if err := validateOps(ops); err != nil {
		return nil, err
	}
	paths := make([]string, len(ops))
	for i, op := range ops {
		paths[i], _ = zk.OpPath(op)
	}
	var res []zk.OpResult
	var opErr error
	err := c.call(ctx, request{op: fault.OpMulti, paths: paths, frame: frameMulti(ops)}, func(bool) error {
		opErr = c.s.write(func(t *txn) error {
			var err error
			res, err = t.multi(ops, c.principal())
			return err
		})
		return opErr
	})
	// A late write's closure runs after call returned ErrConnectionLoss
	// (see LateNextWrite): opErr is not read then.
	if errors.Is(err, zk.ErrConnectionLoss) || err != nil && err != opErr {
		return nil, err
	}
	return res, err
}

// Sync implements zk.Conn: a single server is always in sync, so it is a
// round trip that changes nothing and takes no zxid.
func (c *simConn) Sync(ctx context.Context, path string) error {
	if err := zk.ValidatePath(path); err != nil {
		return err
	}
	return c.call(ctx, request{paths: []string{path}, frame: frameHeader + frameString(path)}, func(bool) error { return nil })
}

// opAuth is the kind of an AddAuth request: no reply fault matches it.
const opAuth fault.OpKind = "auth"

// AddAuth authenticates c as the server's default providers do, for its
// session and every later one (go-zookeeper re-sends the credentials of
// its successful AddAuths on every reconnect, before any request).
// "digest" with cred "user:password" adds the identity
// zk.DigestID(user, password): any password is accepted (a wrong one is
// simply another identity). "ip" adds nothing (every session already has
// the identity ip:127.0.0.1). Any other scheme is refused with
// zk.ErrAuthFailed, after which the server closes the connection: c's
// subscribers see SUSPENDED and at once RECONNECTED with the same session,
// and c's identities stay as they were. As the adapter does, an empty
// scheme and a digest cred that is not "user:password" with a user are
// refused with zk.ErrInvalidOption (an zk.ErrBadArguments) before anything
// is sent.
func (c *simConn) AddAuth(ctx context.Context, scheme string, cred []byte) error {
	user, password, ok := strings.Cut(string(cred), ":")
	if scheme == "" {
		return fmt.Errorf("%w: AddAuth with an empty scheme", zk.ErrInvalidOption)
	}
	if scheme == "digest" && (!ok || user == "") {
		return fmt.Errorf("%w: digest credentials must be \"user:password\"", zk.ErrInvalidOption)
	}
	req := request{op: opAuth, frame: frameHeader + 4 + frameString(scheme) + 4 + len(cred)}
	err := c.call(ctx, req, func(bool) error {
		switch scheme {
		case "digest":
			if id := zk.DigestID(user, password); !slices.Contains(c.digests, id) {
				c.digests = append(c.digests, id)
			}
		case "ip":
		default:
			return fmt.Errorf("%w: no authentication provider for scheme %q", zk.ErrAuthFailed, scheme)
		}
		return nil
	})
	if errors.Is(err, zk.ErrAuthFailed) {
		c.s.mu.Lock()
		if c.online() {
			c.cut(zk.ErrConnectionLoss)
			c.restore()
		}
		c.s.mu.Unlock()
		c.s.deliver()
	}
	return err
}

// SessionID implements zk.Conn.
func (c *simConn) SessionID() int64 {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.session
}

// State implements zk.Conn.
func (c *simConn) State() zk.SessionState {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.state
}

// Subscribe implements zk.Conn. fn runs on the goroutine whose call or
// fault verb caused the change, never under the Sim's lock.
func (c *simConn) Subscribe(fn func(zk.SessionEvent)) (cancel func()) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.nextSub++
	id := c.nextSub
	c.subs = append(c.subs, subscriber{id: id, fn: fn})
	return func() {
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		c.subs = slices.DeleteFunc(c.subs, func(s subscriber) bool { return s.id == id })
	}
}

// Close implements zk.Conn: the session ends at once, even when c is cut
// (its ephemerals go in one transaction; its own watches on them fire if it
// is connected), replies owed fail with zk.ErrClosed, every remaining watch
// ends with EventNotWatching and zk.ErrClosed, subscribers see CLOSED, and
// later calls return zk.ErrClosed, as does closing again.
func (c *simConn) Close() error {
	s := c.s
	s.mu.Lock()
	if c.state == zk.StateClosed {
		s.mu.Unlock()
		return nil // Close is idempotent, as on the adapter
	}
	c.drop(zk.ErrClosed)
	c.applyLate() // committed before the session's end
	s.closeSession(c.session)
	c.dropWatches(zk.ErrClosed)
	if c.state == zk.StateSuspended {
		close(c.up)
	}
	c.state = zk.StateClosed
	c.emit(zk.StateClosed, c.session)
	c.session = 0
	c.faults = nil
	s.conns = slices.DeleteFunc(s.conns, func(o *simConn) bool { return o == c })
	s.mu.Unlock()
	s.deliver()
	return nil
}
