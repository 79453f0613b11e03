package zk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// Connect opens a session with the ZooKeeper servers (host:port; the port
// defaults to 2181), applies the options (authentication, chroot, ACL: see
// Wrap) and returns once the session is established (StateConnected) and
// authenticated. Host names are resolved at each dial, not up front. If ctx
// ends first, it closes what it opened and returns ctx.Err(); so it does
// when the server refuses an authentication (ErrAuthFailed) or, with
// WithTLS, once every server failed its TLS handshake. Servers and chroot
// can come from ZooKeeper's connect string (ParseConnectString).
func Connect(ctx context.Context, servers []string, opts ...Option) (Conn, error) {
	if len(servers) == 0 {
		return nil, ErrNoServers
	}
	for _, s := range servers {
		if s == "" {
			return nil, fmt.Errorf("%w: empty address in %q", ErrNoServers, servers)
		}
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := dial(ctx, servers, cfg)
	if err != nil {
		return nil, err
	}
	conn, err := wrap(ctx, c, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	return conn, nil
}

// dial opens the session Connect returns (before its options are applied).
func dial(ctx context.Context, servers []string, cfg config) (*client, error) {
	stop, cancel := context.WithCancel(context.Background())
	c := &client{
		stop:      cancel,
		connected: make(chan struct{}),
		closeDone: make(chan struct{}),
	}
	c.dialer = &dialer{stop: stop, handshake: handshakeTimeout(cfg.sessionTimeout), watching: c.watches.any,
		tls: cfg.tls, servers: len(servers), tlsFailed: make(chan error, 1)}
	// Hold c.mu until c.gz is set: the event callback reads it.
	c.mu.Lock()
	gz, events, err := gozk.Connect(servers, cfg.sessionTimeout,
		gozk.WithHostProvider(newHostProvider(cfg.backoffBase, cfg.backoffMax, stop.Done())),
		gozk.WithDialer(c.dialer.dial),
		gozk.WithEventCallback(c.onEvent),
		gozk.WithLogger(zkLogger{cfg.logger}),
		gozk.WithLogInfo(false),
	)
	if err != nil {
		c.mu.Unlock()
		cancel()
		return nil, mapErr(err)
	}
	// go-zookeeper's own event channel holds 6 events and drops the rest;
	// the adapter ignores it and only drains it at Close, where its closing
	// says that go-zookeeper's goroutines have ended.
	c.gz, c.loopDone = gz, events
	c.mu.Unlock()

	var failed error
	select {
	case <-c.connected:
		return c, nil
	case failed = <-c.dialer.tlsFailed:
	case <-ctx.Done():
		failed = ctx.Err()
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.shutdown()
	return nil, failed
}

// AddAuth adds an identity to the session (ZooKeeper's addAuth), as
// WithAuth does: "digest" takes "user:password". It returns once the
// server accepted it, ErrAuthFailed if it refused it (the server then
// closes the connection, and the connection reconnects without it), or
// ErrConnectionLoss if the connection broke first (the session may or may
// not have the identity; calling again is harmless). An accepted identity
// is re-sent on every new connection, and to the new session after an
// expiry, before any other request.
func (c *client) AddAuth(ctx context.Context, scheme string, cred []byte) error {
	if scheme == "" {
		return fmt.Errorf("%w: AddAuth with an empty scheme", ErrInvalidOption)
	}
	if scheme == "digest" {
		if err := validDigest(cred); err != nil {
			return err
		}
	}
	cred = bytes.Clone(cred) // go-zookeeper keeps it to re-send
	_, err := call(ctx, c, func(gz *gozk.Conn) (struct{}, error) {
		return struct{}{}, gz.AddAuth(scheme, cred)
	})
	return err
}

// client implements Conn on a go-zookeeper connection.
type client struct {
	gz        *gozk.Conn
	loopDone  <-chan gozk.Event // closed when go-zookeeper's goroutines are done
	stop      context.CancelFunc
	dialer    *dialer
	connected chan struct{} // closed at the first CONNECTED
	closeDone chan struct{} // closed when Close has finished

	// noContainers is set once the server said it does not know containers.
	noContainers atomic.Bool

	// watches counts the watches go-zookeeper may hold, for the resync hold
	// of the dialer's connections (see resyncGrace).
	watches watchCount

	// order delivers node events to watch channels in the server's order.
	order inOrder

	// deliverMu orders session-event deliveries; taken before mu.
	deliverMu sync.Mutex

	mu     sync.Mutex
	closed bool
	track  tracker
	subs   []*subscriber  // copy on write
	calls  sync.WaitGroup // request goroutines and watch forwarders; Add under mu while !closed
}

var _ Conn = (*client)(nil)

// Server is the address (host:port) of the server the connection is on, or
// was last on: spans report it as server.address and server.port.
func (c *client) Server() string { return c.gz.Server() }

// worldAll is the ACL of every node the adapter creates: world:anyone, all
// permissions.
var worldAll = gozk.WorldACL(gozk.PermAll)

// begin registers one goroutine in c.calls, or reports ErrClosed.
func (c *client) begin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.calls.Add(1)
	return nil
}

func (c *client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// call runs one go-zookeeper request (which takes no context) on its own
// goroutine and returns its result, or ctx.Err() if ctx ends first; the
// request then finishes unobserved, at the latest when the Conn is closed.
// Errors are mapped to this package's sentinels; a request cut short by
// Close reports ErrClosed.
func call[T any](ctx context.Context, c *client, req func(gz *gozk.Conn) (T, error)) (T, error) {
	var zero T
	if c == nil {
		return zero, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if err := c.begin(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer c.calls.Done()
		v, err := req(c.gz)
		done <- result{v, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done: // the reply won the race; report it
		default:
			return zero, ctx.Err()
		}
	}
	if r.err == nil {
		return r.v, nil
	}
	err := mapErr(r.err)
	if errors.Is(err, ErrConnectionLoss) && c.isClosed() {
		err = fmt.Errorf("%w: %v", ErrClosed, r.err)
	}
	return r.v, err
}

// watch returns the WatchEvent channel of capacity 1 of go-zookeeper's
// one-shot watch src: it receives exactly one event and is then closed.
// It runs in the request's goroutine, right after go-zookeeper answered the
// watch request begun at gen (c.watches.begin) and ticket (c.order.expect),
// so that a watch whose caller has gone is still counted; src is nil when
// no watch was left. The event callback delivers its event, in the
// server's order (see inOrder); a goroutine forwards src only when an
// event on the path may have passed the callback before the watch was
// registered there. rel rewrites the event's path (see RewriteWatchPath).
func (c *client) watch(gen, ticket uint64, src <-chan gozk.Event, path string, kind watchKind, rel func(string) string) <-chan WatchEvent {
	if src == nil {
		c.order.settle(path, ticket, kind, nil)
		c.watches.end(gen, false)
		return nil
	}
	out := make(chan WatchEvent, 1)
	if err := c.begin(); err != nil {
		// Close began while the request was answered; go-zookeeper ends
		// the watch with ErrClosing, unobserved.
		c.order.settle(path, ticket, kind, nil)
		c.watches.end(gen, false)
		out <- WatchEvent{Type: EventNotWatching, Err: ErrClosed}
		close(out)
		return out
	}
	c.watches.end(gen, true)
	// The watch is counted gone before its event is seen: a reconnect
	// right after the event must not hold its requests for it (resync).
	p := &pendingWatch{out: out, fired: c.watches.fired, rel: rel}
	if !c.order.settle(path, ticket, kind, p) {
		c.calls.Done() // the callback delivers its event
		return out
	}
	go func() {
		defer c.calls.Done()
		ev, ok := <-src
		c.order.unregister(path, kind, p)
		if !ok {
			ev = gozk.Event{Type: gozk.EventNotWatching, Err: gozk.ErrClosing}
		}
		p.deliver(ev)
	}()
	return out
}

func watchEvent(ev gozk.Event) WatchEvent {
	w := WatchEvent{Path: ev.Path}
	switch ev.Type {
	case gozk.EventNodeCreated:
		w.Type = EventNodeCreated
	case gozk.EventNodeDeleted:
		w.Type = EventNodeDeleted
	case gozk.EventNodeDataChanged:
		w.Type = EventNodeDataChanged
	case gozk.EventNodeChildrenChanged:
		w.Type = EventNodeChildrenChanged
	default: // EventNotWatching: expiry or close ended the watch
		w.Type = EventNotWatching
		if errors.Is(mapErr(ev.Err), ErrSessionExpired) {
			w.Err = ErrSessionExpired
		} else {
			w.Err = ErrClosed
		}
	}
	return w
}

func stat(s *gozk.Stat) Stat {
	if s == nil {
		return Stat{}
	}
	return Stat{
		Czxid:          s.Czxid,
		Mzxid:          s.Mzxid,
		Pzxid:          s.Pzxid,
		Ctime:          s.Ctime,
		Mtime:          s.Mtime,
		Version:        s.Version,
		Cversion:       s.Cversion,
		Aversion:       s.Aversion,
		EphemeralOwner: s.EphemeralOwner,
		DataLength:     s.DataLength,
		NumChildren:    s.NumChildren,
	}
}

// createFlags returns go-zookeeper's flags for the non-container modes.
func createFlags(m CreateMode) (int32, error) {
	switch m {
	case ModePersistent:
		return gozk.FlagPersistent, nil
	case ModeEphemeral:
		return gozk.FlagEphemeral, nil
	case ModePersistentSequential:
		return gozk.FlagSequence, nil
	case ModeEphemeralSequential:
		return gozk.FlagEphemeral | gozk.FlagSequence, nil
	}
	return 0, fmt.Errorf("%w: create mode %d", ErrBadArguments, int(m))
}

// Create creates path with the connection's ACL; see CreateACL.
func (c *client) Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error) {
	return c.CreateACL(ctx, path, data, mode, nil)
}

// CreateACL creates path. ModeContainer uses ZooKeeper's createContainer;
// the first time a server answers that it does not implement it (before
// 3.5), this Conn switches to persistent nodes for good.
func (c *client) CreateACL(ctx context.Context, path string, data []byte, mode CreateMode, acl []ACL) (string, error) {
	if err := ValidatePath(path); err != nil {
		return "", err
	}
	if c == nil {
		return "", ErrClosed
	}
	zacl := gozkACL(acl)
	if mode == ModeContainer {
		return c.createContainer(func(container bool) (string, error) {
			return call(ctx, c, func(gz *gozk.Conn) (string, error) {
				if container {
					return gz.CreateContainer(path, data, gozk.FlagContainer, zacl)
				}
				return gz.Create(path, data, gozk.FlagPersistent, zacl)
			})
		})
	}
	flags, err := createFlags(mode)
	if err != nil {
		return "", err
	}
	return call(ctx, c, func(gz *gozk.Conn) (string, error) {
		return gz.Create(path, data, flags, zacl)
	})
}

// gozkACL translates acl for go-zookeeper; nil is world:anyone, all
// permissions.
func gozkACL(acl []ACL) []gozk.ACL {
	if acl == nil {
		return worldAll
	}
	out := make([]gozk.ACL, len(acl))
	for i, a := range acl {
		out[i] = gozk.ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out
}

// createContainer runs create as a container create, or as a persistent one
// once the server has been seen without containers.
func (c *client) createContainer(create func(container bool) (string, error)) (string, error) {
	if !c.noContainers.Load() {
		p, err := create(true)
		if !errors.Is(err, ErrUnimplemented) {
			return p, err
		}
		c.noContainers.Store(true)
	}
	return create(false)
}

func (c *client) Delete(ctx context.Context, path string, version int32) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	_, err := call(ctx, c, func(gz *gozk.Conn) (struct{}, error) {
		return struct{}{}, gz.Delete(path, version)
	})
	return err
}

type existsResult struct {
	stat   Stat
	exists bool
	w      <-chan WatchEvent
}

func (c *client) Exists(ctx context.Context, path string) (Stat, bool, error) {
	if err := ValidatePath(path); err != nil {
		return Stat{}, false, err
	}
	r, err := call(ctx, c, func(gz *gozk.Conn) (existsResult, error) {
		ok, s, err := gz.Exists(path)
		return existsResult{stat: stat(s), exists: ok}, err
	})
	if err != nil || !r.exists {
		return Stat{}, false, err
	}
	return r.stat, true, nil
}

func (c *client) ExistsW(ctx context.Context, path string) (Stat, bool, <-chan WatchEvent, error) {
	if err := ValidatePath(path); err != nil {
		return Stat{}, false, nil, err
	}
	rel := RewriteWatchPath(ctx)
	r, err := call(ctx, c, func(gz *gozk.Conn) (existsResult, error) {
		gen, ticket := c.watches.begin(), c.order.expect(path)
		ok, s, ch, err := gz.ExistsW(path)
		kind := kindExist
		if ok {
			kind = kindData
		}
		return existsResult{stat: stat(s), exists: ok, w: c.watch(gen, ticket, ch, path, kind, rel)}, err
	})
	if err != nil {
		return Stat{}, false, nil, err
	}
	if !r.exists {
		r.stat = Stat{}
	}
	return r.stat, r.exists, r.w, nil
}

type getResult struct {
	data []byte
	stat Stat
	w    <-chan WatchEvent
}

func (c *client) Get(ctx context.Context, path string) ([]byte, Stat, error) {
	if err := ValidatePath(path); err != nil {
		return nil, Stat{}, err
	}
	r, err := call(ctx, c, func(gz *gozk.Conn) (getResult, error) {
		d, s, err := gz.Get(path)
		return getResult{data: d, stat: stat(s)}, err
	})
	if err != nil {
		return nil, Stat{}, err
	}
	return r.data, r.stat, nil
}

func (c *client) GetW(ctx context.Context, path string) ([]byte, Stat, <-chan WatchEvent, error) {
	if err := ValidatePath(path); err != nil {
		return nil, Stat{}, nil, err
	}
	rel := RewriteWatchPath(ctx)
	r, err := call(ctx, c, func(gz *gozk.Conn) (getResult, error) {
		gen, ticket := c.watches.begin(), c.order.expect(path)
		d, s, ch, err := gz.GetW(path)
		return getResult{data: d, stat: stat(s), w: c.watch(gen, ticket, ch, path, kindData, rel)}, err
	})
	if err != nil {
		return nil, Stat{}, nil, err
	}
	return r.data, r.stat, r.w, nil
}

type childrenResult struct {
	names []string
	stat  Stat
	w     <-chan WatchEvent
}

func (c *client) Children(ctx context.Context, path string) ([]string, Stat, error) {
	if err := ValidatePath(path); err != nil {
		return nil, Stat{}, err
	}
	r, err := call(ctx, c, func(gz *gozk.Conn) (childrenResult, error) {
		n, s, err := gz.Children(path)
		return childrenResult{names: n, stat: stat(s)}, err
	})
	if err != nil {
		return nil, Stat{}, err
	}
	return r.names, r.stat, nil
}

func (c *client) ChildrenW(ctx context.Context, path string) ([]string, Stat, <-chan WatchEvent, error) {
	if err := ValidatePath(path); err != nil {
		return nil, Stat{}, nil, err
	}
	rel := RewriteWatchPath(ctx)
	r, err := call(ctx, c, func(gz *gozk.Conn) (childrenResult, error) {
		gen, ticket := c.watches.begin(), c.order.expect(path)
		n, s, ch, err := gz.ChildrenW(path)
		return childrenResult{names: n, stat: stat(s), w: c.watch(gen, ticket, ch, path, kindChild, rel)}, err
	})
	if err != nil {
		return nil, Stat{}, nil, err
	}
	return r.names, r.stat, r.w, nil
}

func (c *client) Set(ctx context.Context, path string, data []byte, version int32) (Stat, error) {
	if err := ValidatePath(path); err != nil {
		return Stat{}, err
	}
	s, err := call(ctx, c, func(gz *gozk.Conn) (Stat, error) {
		s, err := gz.Set(path, data, version)
		return stat(s), err
	})
	if err != nil {
		return Stat{}, err
	}
	return s, nil
}

// multiRequests translates ops, refusing bad ones before anything is sent.
func multiRequests(ops []Op) ([]any, error) {
	reqs := make([]any, len(ops))
	for i, op := range ops {
		var path string
		switch o := op.(type) {
		case *CreateOp:
			if o == nil {
				break
			}
			if o.Mode == ModeContainer {
				return nil, fmt.Errorf("%w: op %d: container create in a multi", ErrBadArguments, i)
			}
			flags, err := createFlags(o.Mode)
			if err != nil {
				return nil, fmt.Errorf("op %d: %w", i, err)
			}
			path, reqs[i] = o.Path, &gozk.CreateRequest{Path: o.Path, Data: o.Data, Acl: gozkACL(o.ACL), Flags: flags}
		case *DeleteOp:
			if o != nil {
				path, reqs[i] = o.Path, &gozk.DeleteRequest{Path: o.Path, Version: o.Version}
			}
		case *SetOp:
			if o != nil {
				path, reqs[i] = o.Path, &gozk.SetDataRequest{Path: o.Path, Data: o.Data, Version: o.Version}
			}
		case *CheckOp:
			if o != nil {
				path, reqs[i] = o.Path, &gozk.CheckVersionRequest{Path: o.Path, Version: o.Version}
			}
		}
		if reqs[i] == nil {
			return nil, fmt.Errorf("%w: op %d: %T", ErrBadArguments, i, op)
		}
		if err := ValidatePath(path); err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
	}
	return reqs, nil
}

func (c *client) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	reqs, err := multiRequests(ops)
	if err != nil {
		return nil, err
	}
	resp, err := call(ctx, c, func(gz *gozk.Conn) ([]gozk.MultiResponse, error) {
		return gz.Multi(reqs...)
	})
	if resp == nil {
		return nil, err
	}
	res := make([]OpResult, len(resp))
	for i, r := range resp {
		res[i] = OpResult{Path: r.String, Stat: stat(r.Stat), Err: mapErr(r.Error)}
	}
	return res, err
}

func (c *client) Sync(ctx context.Context, path string) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	_, err := call(ctx, c, func(gz *gozk.Conn) (string, error) {
		return gz.Sync(path)
	})
	return err
}

// Close ends the session (the server deletes its ephemeral nodes at once
// when it can be reached), ends every watch with EventNotWatching and
// ErrClosed, waits for every goroutine of the connection, and publishes
// CLOSED. It usually takes a round trip; if the server cannot be reached it
// can take about a second, go-zookeeper's wait for the close reply. Calls
// after Close, and further Close calls, return ErrClosed.
func (c *client) Close() error {
	if c == nil {
		return ErrClosed
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.closeDone
		return nil // Close is idempotent: the first call did it
	}
	c.closed = true
	sid := c.track.sid
	c.mu.Unlock()

	c.shutdown()

	c.deliverMu.Lock()
	c.mu.Lock()
	subs := c.subs
	c.subs = nil
	c.mu.Unlock()
	deliver(subs, []SessionEvent{{State: StateClosed, SessionID: sid, Time: time.Now()}})
	c.deliverMu.Unlock()
	close(c.closeDone)
	return nil
}

// shutdown stops go-zookeeper and waits for every goroutine the connection
// started. c.closed is already set, so the callback ignores what follows.
func (c *client) shutdown() {
	// Wake the host provider and abort a dial: go-zookeeper's connect loop
	// then sees retryStart and, once gz.Close has begun, returns.
	c.stop()
	// Sends closeSession when connected and waits (at most ~1 s) for its reply.
	c.gz.Close()
	// A handshake waiting on a dead connection would wait ten receive
	// timeouts; break it.
	c.dialer.closeConn()
	for range c.loopDone {
	}
	c.calls.Wait()
}
