package rwlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ScopeName is the instrumentation scope of the read/write lock's spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/rwlock"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// The node name markers, Curator's: _c_<uuid>-__READ__<seq> and
// _c_<uuid>-__WRIT__<seq>.
const (
	ReadMarker  = "__READ__"
	WriteMarker = "__WRIT__"
)

// Errors of the read/write lock. Match them with errors.Is.
var (
	// ErrUpgrade: the write lock was asked for while the participant holds
	// (or is acquiring) only the read lock. Waiting would deadlock: the
	// writer waits for every reader before it, ours included.
	ErrUpgrade = errors.New("rwlock: upgrade from read to write lock")
	// ErrSessionLost: the session expired (or was replaced) while acquiring
	// or holding.
	ErrSessionLost = fmt.Errorf("rwlock: %w", zkrecipes.ErrSessionLost)
	// ErrSuspended: the connection was lost while holding, and the lock
	// counts that as losing the hold (the default policy).
	ErrSuspended = fmt.Errorf("rwlock: %w", zkrecipes.ErrSuspended)
	// ErrNodeDeleted: our node was deleted by someone else.
	ErrNodeDeleted = fmt.Errorf("rwlock: lock %w by another client", zkrecipes.ErrNodeDeleted)
	// ErrNotHeld: Release without a hold; or a downgrade whose write hold
	// ended before the reader was made.
	ErrNotHeld = errors.New("rwlock: not held")
	// ErrClosed: the RWLock, or its connection, is closed (or nil).
	ErrClosed = fmt.Errorf("rwlock: %w", zkrecipes.ErrClosed)
	// ErrReleased: the hold ended by Release (Grant.Err).
	ErrReleased = errors.New("rwlock: released")
	// ErrCleanupPending: Close could not delete the lock's nodes within its
	// close timeout (the connection is down); the connection deletes them
	// when the same session reconnects, or the session's end does.
	ErrCleanupPending = fmt.Errorf("rwlock: %w", zkrecipes.ErrCleanupPending)
	// ErrInvalidOption: New refused an option's value.
	ErrInvalidOption = fmt.Errorf("rwlock: %w", zkrecipes.ErrInvalidOption)
)

var errs = contention.Errors{
	SessionLost:    ErrSessionLost,
	Suspended:      ErrSuspended,
	NodeDeleted:    ErrNodeDeleted,
	NotHeld:        ErrNotHeld,
	Closed:         ErrClosed,
	Released:       ErrReleased,
	CleanupPending: ErrCleanupPending,
	InvalidOption:  ErrInvalidOption,
}

// RWLock is one participant of a read/write lock: a read lock and a write
// lock on the same path, which may be held together (a downgrade).
type RWLock struct {
	path, id    string
	read, write *Lock
	// downgrade orders a downgrade's create before the write lock's
	// release, which then knows a reader sits beside it (see Release).
	downgrade sync.Mutex
	bus       *events.Joined // START, then both locks' events
	closeOnce sync.Once
	closeErr  error
}

// Option configures an RWLock. A nil Option is ignored.
type Option func(*options)

type options struct {
	contention.Options
	revocable, reentrant bool
	acl                  []zk.ACL
}

// WithID names this participant on its lifecycle events (its handles add
// "/read" and "/write"), and is its nodes' data, which Holders shows.
// Default: a random uuid.
func WithID(id string) Option { return func(o *options) { o.ID = id } }

// WithTracerProvider sets where spans go. Default: otel's global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.TracerProvider = tp }
}

// WithMeterProvider sets where measurements go (the ZooKeeper requests'
// db.client.operation.duration, the holds' zkrecipes.hold.duration).
// Default: otel's global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.MeterProvider = mp }
}

// AttrMode is the span attribute that says which side of the lock a call
// is on: "read" or "write".
const AttrMode = attribute.Key("zkrecipes.rwlock.mode")

// WithSuspendedIsLost says whether a lost connection (SUSPENDED) already
// ends a hold. Default true; with false only LOST (expiry) ends it.
func WithSuspendedIsLost(lost bool) Option {
	return func(o *options) { o.SuspendedIsLost = lost }
}

// WithCloseTimeout bounds how long Close waits for the nodes to be
// deleted. Default 10s; it must be positive (ErrInvalidOption).
func WithCloseTimeout(d time.Duration) Option {
	return func(o *options) { o.CloseTimeout = d }
}

// WithRevocable makes both locks' grants revocable (see lock.WithRevocable):
// while a lock holds, it watches its node's data, and Grant.RevokeRequested
// closes, with a REVOKE_REQUESTED event, when someone writes "__REVOKE__"
// (lock.RequestRevoke, Curator's Revoker) or "unlock" into it. The holder
// decides; nothing is released by the request. Default: not revocable.
func WithRevocable() Option { return func(o *options) { o.revocable = true } }

// WithReentrant makes the write lock re-entrant, instead of a mutex across
// goroutines: an Acquire of the write lock while it holds, from any
// goroutine, returns at once with the same grant and one more hold, and
// the Release that balances the first lets go. (The read lock counts its
// holds either way.)
func WithReentrant() Option { return func(o *options) { o.reentrant = true } }

// WithACL sets the ACL of every node the participant creates (its read
// and write nodes, their marks, and the lock's directory and missing
// parents), in place of the connection's (zk.WithACL, or its default).
// Default: the connection's. An entry without a scheme or permissions
// makes New fail with ErrInvalidOption.
func WithACL(acl ...zk.ACL) Option { return func(o *options) { o.acl = acl } }

// New returns a participant of the read/write lock at path (the lock's
// directory, created with its missing parents as container nodes on first
// use). Nothing is sent to the server. Errors: zk.ErrInvalidPath for a bad
// path, ErrInvalidOption, ErrClosed for a nil or closed connection.
func New(conn zk.Conn, path string, opts ...Option) (*RWLock, error) {
	o := options{Options: contention.DefaultOptions("rwlock", ScopeName, Version)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.ID == "" {
		o.ID = uuid.NewString()
	}
	rw := &RWLock{path: path, id: o.ID}
	var err error
	if conn != nil { // nil: refused by contention.Open
		if conn, err = zk.UseACL(conn, o.acl...); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
	}
	if rw.read, err = open(rw, conn, path, false, o); err != nil {
		return nil, err
	}
	if rw.write, err = open(rw, conn, path, true, o); err != nil {
		rw.read.inst.Close()
		return nil, err
	}
	rw.bus = events.Join(events.Event{Time: time.Now(), Recipe: "rwlock", Path: path, Instance: rw.id,
		Type: events.Start, State: events.StateStart}, rw.read, rw.write)
	return rw, nil
}

func open(rw *RWLock, conn zk.Conn, path string, write bool, o options) (*Lock, error) {
	markers, kind := []string{ReadMarker, WriteMarker}, "read"
	if write {
		markers, kind = []string{WriteMarker, ReadMarker}, "write"
	}
	data := []byte(o.ID) // the participant's id: Holder.ID
	o.ID += "/" + kind
	o.Mutex = write && !o.reentrant
	inst, err := contention.Open(conn, contention.Config{
		Dir:       path,
		Data:      data,
		Markers:   markers,
		Predicate: contention.ReadWrite(ReadMarker),
		Errors:    errs,
		NewID:     uuid.NewString,
		Revocable: o.revocable,
	}, o.Options)
	if err != nil {
		return nil, err
	}
	return &Lock{rw: rw, kind: kind, inst: inst}, nil
}

// Path is the lock's directory, as given to New.
func (rw *RWLock) Path() string { return rw.path }

// ID is the participant's id: WithID's, or a random uuid.
func (rw *RWLock) ID() string { return rw.id }

// State is the write lock's state while it is on its way to a hold or
// holds, and otherwise the read lock's: START, OFFER, DETERMINE, READY,
// LEADER (held), FAILED or STOP.
func (rw *RWLock) State() events.State {
	if s := rw.write.State(); s != events.StateStart && s != events.StateStop {
		return s
	}
	return rw.read.State()
}

// Subscribe returns a subscription to the participant's lifecycle events:
// its own START, then both locks' (each names its lock by its id, ending
// in "/read" or "/write"). Close it when done.
func (rw *RWLock) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return rw.bus.Subscribe(opts...)
}

// ReadLock is the participant's read lock: held beside other readers,
// never beside a writer.
func (rw *RWLock) ReadLock() *Lock { return rw.read }

// WriteLock is the participant's write lock: held alone (but for this
// participant's own read lock, after a downgrade).
func (rw *RWLock) WriteLock() *Lock { return rw.write }

// Close releases what both locks hold, fails their waiting calls with
// ErrClosed, deletes their nodes (waiting at most the close timeout) and
// stops them; see lock.Lock.Close. Later calls return the first one's
// result.
func (rw *RWLock) Close() error {
	rw.closeOnce.Do(func() {
		// The reader first: a writer's node goes with its release mark,
		// which tells the writer behind it that no reader of ours is left.
		rerr := rw.read.inst.Close()
		rw.closeErr = errors.Join(rerr, rw.write.inst.Close())
		if errors.Is(rw.closeErr, ErrCleanupPending) {
			rw.closeErr = ErrCleanupPending
		}
		rw.bus.Close()
	})
	return rw.closeErr
}

// Lock is one of a participant's two locks. The write lock is, like
// lock.Lock, a mutex across goroutines as across processes: an Acquire
// while it holds waits until that hold is released, by any goroutine
// (WithReentrant: it counts one more hold). The read lock counts its holds:
// several goroutines may hold it at once, and the Release that balances the
// first lets go. Its methods are safe for concurrent use.
type Lock struct {
	rw   *RWLock
	kind string // "read" or "write"
	inst *contention.Instance

	calls atomic.Int32 // Acquire calls under way (the read lock's make a write Acquire an upgrade)
	mu    sync.Mutex
	grant *Grant // the latest grant (the write lock's: what a downgrade sits beside)
}

// Grant is one hold of a read or write lock.
type Grant struct {
	l      *Lock
	term   uint64
	node   string
	token  int64
	loss   *runtime.Loss
	revoke *runtime.Signal
}

// Token is the fencing token: the czxid of our node, growing with every
// grant. A downgraded reader's is its own node's, above its writer's.
func (g *Grant) Token() int64 { return g.token }

// Node is the full path of our node.
func (g *Grant) Node() string { return g.node }

// Lost is closed when the hold ends or can no longer be trusted; Err says
// why.
func (g *Grant) Lost() <-chan struct{} { return g.loss.Done() }

// Err is nil while the hold lasts; then ErrReleased, ErrSuspended,
// ErrSessionLost, ErrNodeDeleted or ErrClosed.
func (g *Grant) Err() error { return g.loss.Err() }

// RevokeRequested is closed when someone asked the holder to give this
// grant up while it held, on an RWLock made WithRevocable (see
// lock.RequestRevoke). The grant goes on until the holder releases it; on
// one not revocable it never closes. A downgraded reader is its own node,
// asked on its own.
func (g *Grant) RevokeRequested() <-chan struct{} { return g.revoke.Done() }

// Guard returns an op to put in a zk Multi beside a write: the multi fails
// (zk.ErrNoNode) unless our node still exists.
func (g *Grant) Guard() *zk.CheckOp { return &zk.CheckOp{Path: g.node, Version: zk.AnyVersion} }

// Release gives back this hold, as Lock.Release does. ErrNotHeld, wrapping
// Err, once the hold has ended.
func (g *Grant) Release(ctx context.Context) error { return g.l.release(ctx, g) }

// Acquire blocks until the lock is held, ctx ends, or the session is lost.
// A held read lock returns the same grant with one more hold; a held write
// lock waits until that hold is released (WithReentrant: as the read
// lock). The read lock
// asked for while the participant holds the write lock is a downgrade: it
// holds at once, at the writer's place in the queue, so no writer queued
// behind ours gets in when the write lock is then released. The write lock
// asked for while the participant holds or is acquiring only the read lock
// fails with ErrUpgrade, with nothing sent.
func (l *Lock) Acquire(ctx context.Context) (*Grant, error) {
	_, g, err := l.acquire(ctx, false)
	return g, err
}

// TryAcquire takes the lock if it can be held now, and otherwise returns
// false at once (after one round of requests), leaving nothing behind. A
// held write lock returns false with no request (WithReentrant: true).
func (l *Lock) TryAcquire(ctx context.Context) (bool, *Grant, error) {
	return l.acquire(ctx, true)
}

func (l *Lock) acquire(ctx context.Context, try bool) (bool, *Grant, error) {
	in := contention.Acquire{Try: try}
	attrs := []attribute.KeyValue{AttrMode.String(l.kind)}
	if l == l.rw.read {
		l.rw.downgrade.Lock()
		if w := l.rw.write.held(); w != nil {
			in.Beside = w.node
			attrs = append(attrs, attribute.Bool("zkrecipes.rwlock.downgrade", true))
			defer l.rw.downgrade.Unlock() // until the reader is made
		} else {
			l.rw.downgrade.Unlock()
		}
	}
	l.calls.Add(1)
	r, err := l.inst.Acquire(ctx, in, l.upgrade, attrs...)
	l.calls.Add(-1)
	if err != nil || !r.Granted {
		return false, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.grant == nil || l.grant.loss != r.Loss {
		l.grant = &Grant{l: l, term: r.Grant.Term, node: r.Grant.Node, token: r.Grant.Token, loss: r.Loss, revoke: r.Revoke}
	}
	return true, l.grant, nil
}

// upgrade refuses the write lock while the participant holds or is
// acquiring only the read lock.
func (l *Lock) upgrade() error {
	if l == l.rw.write && l.held() == nil && (l.rw.read.held() != nil || l.rw.read.calls.Load() > 0) {
		return fmt.Errorf("%w: the read lock is held or being acquired", ErrUpgrade)
	}
	return nil
}

// held returns the lock's grant while it lasts, nil otherwise.
func (l *Lock) held() *Grant {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.grant == nil || l.grant.Err() != nil {
		return nil
	}
	return l.grant
}

// Release gives back one hold; the last one deletes our node, and Release
// returns once it is gone (or ctx ends: the delete goes on in the
// background). ErrNotHeld when the lock holds nothing; also after a hold
// was lost, which the write lock (not WithReentrant) still releases so:
// until then its next Acquire waits.
func (l *Lock) Release(ctx context.Context) error { return l.release(ctx, nil) }

// release gives back one hold: g's, or (nil) the lock's.
func (l *Lock) release(ctx context.Context, g *Grant) error {
	in, loss := contention.Release{}, (*runtime.Loss)(nil)
	if g != nil {
		in.Term, loss = g.term, g.loss
	}
	if l == l.rw.write {
		// A writer that leaves no reader of ours beside it releases with
		// the release mark, and the writer behind it holds with no read; one
		// that leaves its downgraded reader deletes plainly, and the writer
		// behind lists again and finds the reader.
		l.rw.downgrade.Lock()
		defer l.rw.downgrade.Unlock()
		in.NoMark = l.rw.read.held() != nil
	}
	return l.inst.Release(ctx, loss, in, AttrMode.String(l.kind))
}

// Path is the lock's directory, as given to New.
func (l *Lock) Path() string { return l.rw.path }

// ID is the lock's id: its participant's, then "/read" or "/write".
func (l *Lock) ID() string { return l.inst.ID() }

// State is the lock machine's state: START, OFFER, DETERMINE, READY, LEADER
// (held), FAILED or STOP.
func (l *Lock) State() events.State { return l.inst.State() }

// Subscribe returns a subscription to the lock's lifecycle events. Close it
// when done.
func (l *Lock) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return l.inst.Subscribe(opts...)
}
