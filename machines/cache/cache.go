package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ScopeName is the instrumentation scope of the caches' spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/cache"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// Errors of the caches. Match them with errors.Is.
var (
	// ErrInvalidOption: an option's value is out of range (a negative
	// WithMaxDepth, a nil provider), or the constructor cannot use it
	// (WithMaxDepth on a node or children cache). Nothing was sent.
	ErrInvalidOption = fmt.Errorf("cache: %w", zkrecipes.ErrInvalidOption)
	// ErrClosed: the cache or its connection is closed.
	ErrClosed = fmt.Errorf("cache: %w", zkrecipes.ErrClosed)
)

// Node is a cached node: its full path, its data (nil when the cache keeps
// no data: WithData(false)) and its Stat, as the server had them at one
// moment. Data is shared with the cache and its events: do not modify it.
type Node struct {
	Path string
	Data []byte
	Stat zk.Stat
}

// NodeCache follows one node (Curator's NodeCache, kazoo's DataWatch).
type NodeCache struct{ handle }

// ChildrenCache follows the children of one node (Curator's
// PathChildrenCache, kazoo's ChildrenWatch); the node itself is watched
// but not published.
type ChildrenCache struct{ handle }

// TreeCache follows a node and everything below it, to WithMaxDepth
// (Curator's TreeCache).
type TreeCache struct{ handle }

// handle is what every cache has: a machine run by a runtime.Shell and
// the view it writes.
type handle struct {
	conn  zk.Conn
	path  string
	id    string
	tel   *runtime.Telemetry
	view  *view
	shell *runtime.Shell[input, command]
}

// Option configures a cache. A nil Option is ignored.
type Option func(*options)

type options struct {
	id           string
	tp           trace.TracerProvider
	mp           metric.MeterProvider
	closeTimeout time.Duration
	data         bool
	maxDepth     int
	depthSet     bool
}

// WithID names the cache on its events and spans, and is its ID (default:
// a UUID).
func WithID(id string) Option { return func(o *options) { o.id = id } }

// WithTracerProvider sets where the cache's spans go (default: the global
// provider).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// WithMeterProvider sets where the cache's measurements go (its requests'
// db.client.operation.duration; default: the global provider).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.mp = mp } }

// WithCloseTimeout bounds how long Close waits for the cache to stop
// (default 10s). A cache creates nothing, so it has nothing to delete.
func WithCloseTimeout(d time.Duration) Option { return func(o *options) { o.closeTimeout = d } }

// WithData says whether the cache keeps the nodes' data (default true).
// Without it, Node.Data and the events' Data are nil; the nodes are read
// all the same, for their Stat.
func WithData(keep bool) Option { return func(o *options) { o.data = keep } }

// WithMaxDepth limits a TreeCache to the nodes at most depth levels below
// its path, as Curator's TreeCache counts (the path is 0: WithMaxDepth(0)
// follows the path alone, 1 the path and its children). Default: no
// limit. A negative depth is refused (ErrInvalidOption), as is the option
// on a node or children cache.
func WithMaxDepth(depth int) Option {
	return func(o *options) { o.maxDepth, o.depthSet = depth, true }
}

// NewNode returns a cache of the node at path: Get is the node as last
// read (ok false while it does not exist; a missing node is waited for).
// Errors: zk.ErrInvalidPath (a relative path), ErrInvalidOption,
// ErrClosed (a nil or closed connection).
func NewNode(conn zk.Conn, path string, opts ...Option) (*NodeCache, error) {
	c := &NodeCache{}
	return c, c.start(conn, path, opts, false, func(o *options) config {
		return config{MaxDepth: 0}
	})
}

// NewChildren returns a cache of the children of the node at path:
// Children is a snapshot of them (empty while the node does not exist; a
// missing node is waited for). Errors as NewNode's.
func NewChildren(conn zk.Conn, path string, opts ...Option) (*ChildrenCache, error) {
	c := &ChildrenCache{}
	return c, c.start(conn, path, opts, false, func(o *options) config {
		return config{MaxDepth: 1, HideRoot: true}
	})
}

// NewTree returns a cache of the node at path and the nodes below it, to
// WithMaxDepth. Errors as NewNode's.
func NewTree(conn zk.Conn, path string, opts ...Option) (*TreeCache, error) {
	c := &TreeCache{}
	return c, c.start(conn, path, opts, true, func(o *options) config {
		return config{MaxDepth: o.maxDepth}
	})
}

// start checks everything, then starts the machine made by cfg.
func (h *handle) start(conn zk.Conn, path string, opts []Option, depthOK bool, cfg func(*options) config) error {
	if err := zk.ValidatePath(path); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	o := options{closeTimeout: 10 * time.Second, tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider(),
		data: true, maxDepth: math.MaxInt32}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.depthSet && !depthOK:
		return fmt.Errorf("%w: WithMaxDepth is a tree cache's", ErrInvalidOption)
	case o.maxDepth < 0:
		return fmt.Errorf("%w: max depth %d: it must not be negative", ErrInvalidOption, o.maxDepth)
	case o.closeTimeout <= 0:
		return fmt.Errorf("%w: close timeout %v: it must be positive", ErrInvalidOption, o.closeTimeout)
	case o.tp == nil:
		return fmt.Errorf("%w: nil tracer provider", ErrInvalidOption)
	case o.mp == nil:
		return fmt.Errorf("%w: nil meter provider", ErrInvalidOption)
	case conn == nil:
		return fmt.Errorf("%w: nil connection", ErrClosed)
	case conn.State() == zk.StateClosed:
		return fmt.Errorf("%w: connection closed", ErrClosed)
	}
	if o.id == "" {
		o.id = uuid.NewString()
	}
	c := cfg(&o)
	st := conn.State()
	c.Path, c.Data, c.View = path, o.data, newView()
	c.Up = st == zk.StateConnected || st == zk.StateReconnected
	m, err := newMachine(c)
	if err != nil {
		return err
	}
	h.conn, h.path, h.id, h.view = conn, path, o.id, c.View
	h.tel = runtime.NewTelemetry(conn, runtime.TelemetryConfig{TracerProvider: o.tp, MeterProvider: o.mp,
		Scope: ScopeName, Version: Version, Recipe: "cache", Path: path, Instance: o.id})
	h.shell = runtime.Run(conn, m, runtime.Spec[input, command]{
		Recipe: "cache", Path: path, Instance: o.id, Telemetry: h.tel,
		Exec:      h.exec,
		Withdraw:  func(input) bool { return true },
		ErrorType: errorType, Closed: ErrClosed, CloseTimeout: o.closeTimeout,
	})
	return nil
}

// Path is the cache's node.
func (h *handle) Path() string { return h.path }

// ID is the cache's WithID, or a UUID made for it.
func (h *handle) ID() string { return h.id }

// State is START while the first load runs, READY once it is done, STOP
// once closed.
func (h *handle) State() events.State { return h.shell.State() }

// Subscribe returns a subscription to the cache's events: START, then
// INITIALIZED once the first load is done (at once when it is), NODE_ADDED,
// NODE_UPDATED and NODE_REMOVED, each with the node's path (Node), Data
// and Version at that change, in the server's order for each path;
// SUSPENDED, RECONNECTED and LOST for the session; FAILED (with Node and
// Err) for a node the cache could not read (ErrNoAuth); STOP_START and
// STOP_COMPLETE. The changes of the first load come before INITIALIZED, to
// those who subscribed by then.
func (h *handle) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return h.shell.Subscribe(opts...)
}

// Initialized returns once the first full load is done (at once after it),
// or ctx's error, or ErrClosed.
func (h *handle) Initialized(ctx context.Context) error {
	ctx, span := h.tel.Start(ctx, "initialized", trace.SpanKindInternal)
	defer span.End()
	_, err := h.shell.Do(ctx, func(req uint64) input { return initCall{Req: req} })
	runtime.Fail(span, err, errorType(err))
	return err
}

// Close stops the cache: its view stays as it was, its subscriptions end,
// and Initialized returns ErrClosed. A cache whose connection is closed
// stops by itself.
func (h *handle) Close() error { return h.shell.Close() }

// Get is the node, and false while it does not exist (or is not loaded
// yet).
func (c *NodeCache) Get() (Node, bool) { return c.view.get(c.path) }

// Children is a snapshot of the node's children, by name.
func (c *ChildrenCache) Children() map[string]Node {
	c.view.mu.RLock()
	defer c.view.mu.RUnlock()
	kids := make(map[string]Node, len(c.view.nodes))
	for p, n := range c.view.nodes {
		kids[zk.Base(p)] = n
	}
	return kids
}

// Get is the node at path, which is the cache's path or below it, and
// false when the cache does not have it.
func (c *TreeCache) Get(path string) (Node, bool) { return c.view.get(path) }

// Walk calls fn for each cached node, a parent before its children and
// siblings by name, on a snapshot taken first, until fn returns false.
func (c *TreeCache) Walk(fn func(Node) bool) {
	c.view.mu.RLock()
	nodes := make([]Node, 0, len(c.view.nodes))
	for _, n := range c.view.nodes {
		nodes = append(nodes, n)
	}
	c.view.mu.RUnlock()
	slices.SortFunc(nodes, func(a, b Node) int { return comparePaths(a.Path, b.Path) })
	for _, n := range nodes {
		if !fn(n) {
			return
		}
	}
}

// comparePaths orders paths segment by segment: a parent before its
// children, and all of them before its next sibling.
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		as, ar, _ := strings.Cut(strings.TrimPrefix(a, "/"), "/")
		bs, br, _ := strings.Cut(strings.TrimPrefix(b, "/"), "/")
		if c := cmp.Compare(as, bs); c != 0 {
			return c
		}
		a, b = ar, br
	}
	return cmp.Compare(len(a), len(b))
}

// view is what a cache shows: the nodes its machine published, written
// by the machine as it publishes, read by the handle's accessors.
type view struct {
	mu    sync.RWMutex
	nodes map[string]Node
}

func newView() *view { return &view{nodes: make(map[string]Node)} }

func (v *view) get(path string) (Node, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n, ok := v.nodes[path]
	return n, ok
}

func (v *view) set(n Node) {
	v.mu.Lock()
	v.nodes[n.Path] = n
	v.mu.Unlock()
}

func (v *view) restat(path string, st zk.Stat) {
	v.mu.Lock()
	if n, ok := v.nodes[path]; ok {
		n.Stat = st
		v.nodes[path] = n
	}
	v.mu.Unlock()
}

func (v *view) remove(path string) Node {
	v.mu.Lock()
	n := v.nodes[path]
	delete(v.nodes, path)
	v.mu.Unlock()
	return n
}

func errorType(err error) string {
	if errors.Is(err, ErrClosed) {
		return "closed"
	}
	return runtime.ZKErrorType(err)
}
