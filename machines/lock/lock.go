package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ScopeName is the instrumentation scope of the lock's spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/lock"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// Errors of the lock. Match them with errors.Is.
var (
	// ErrSessionLost: the session expired (or was replaced) while acquiring
	// or holding; whatever the lock held is gone.
	ErrSessionLost = fmt.Errorf("lock: %w", zkrecipes.ErrSessionLost)
	// ErrSuspended: the connection was lost while holding, and the lock
	// counts that as losing the hold (the default policy).
	ErrSuspended = fmt.Errorf("lock: %w", zkrecipes.ErrSuspended)
	// ErrNodeDeleted: our lock node was deleted by someone else.
	ErrNodeDeleted = fmt.Errorf("lock: lock %w by another client", zkrecipes.ErrNodeDeleted)
	// ErrNotHeld: Release without a hold.
	ErrNotHeld = errors.New("lock: not held")
	// ErrClosed: the Lock, or its connection, is closed (or the connection
	// is nil).
	ErrClosed = fmt.Errorf("lock: %w", zkrecipes.ErrClosed)
	// ErrReleased: the hold ended by Release (Grant.Err).
	ErrReleased = errors.New("lock: released")
	// ErrCleanupPending: Close could not delete the lock's node within its
	// close timeout (the connection is down). The connection deletes it
	// when the same session reconnects, or the session's end does.
	ErrCleanupPending = fmt.Errorf("lock: %w", zkrecipes.ErrCleanupPending)
	// ErrInvalidOption: New refused an option's value.
	ErrInvalidOption = fmt.Errorf("lock: %w", zkrecipes.ErrInvalidOption)
)

// Lock is a handle on a distributed lock. A handle is a mutex across
// goroutines as across processes, as sync.Mutex is: an Acquire on a handle
// that holds waits until that hold is released, by any goroutine (unless
// WithReentrant). Its methods are safe for concurrent use.
type Lock struct {
	path string
	inst *contention.Instance
}

// Option configures a Lock.
// A nil Option is ignored.
type Option func(*options)

// options are what the Options set: the contention engine's, and whether
// grants are revocable.
type options struct {
	contention.Options
	revocable, reentrant bool
	acl                  []zk.ACL
}

// WithID names this handle on its lifecycle events, and is its nodes'
// data, which Holders shows. Default: a random uuid.
func WithID(id string) Option { return func(o *options) { o.ID = id } }

// WithTracerProvider sets where spans go. Default: otel's global provider
// (a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.TracerProvider = tp }
}

// WithMeterProvider sets where measurements go (the ZooKeeper requests'
// db.client.operation.duration, the holds' zkrecipes.hold.duration).
// Default: otel's global provider (a no-op until the application installs
// one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.MeterProvider = mp }
}

// WithSuspendedIsLost says whether a lost connection (SUSPENDED) already
// ends a hold. Default true: the session might have expired, so the hold
// cannot be trusted. With false, only LOST (expiry) ends it, and a hold
// survives short connection losses at the risk described in the package
// doc.
func WithSuspendedIsLost(lost bool) Option {
	return func(o *options) { o.SuspendedIsLost = lost }
}

// WithCloseTimeout bounds how long Close waits for the lock's nodes to be
// deleted. Default 10s; it must be positive (ErrInvalidOption). What is
// not deleted by then is deleted by the connection when the same session
// reconnects (Close returns ErrCleanupPending), or by the session's end.
func WithCloseTimeout(d time.Duration) Option {
	return func(o *options) { o.CloseTimeout = d }
}

// WithRevocable makes the lock's grants revocable, like Curator's
// InterProcessMutex.makeRevocable: while it holds, the handle watches its
// own node's data, and Grant.RevokeRequested closes (with a
// REVOKE_REQUESTED event) when someone asks it to give up (RequestRevoke,
// or Curator's Revoker.attemptRevoke). The holder decides: nothing is
// released by the request. It costs one read per grant, and one per write
// to the node. Default: not revocable.
func WithRevocable() Option { return func(o *options) { o.revocable = true } }

// WithReentrant makes the handle re-entrant, instead of a mutex across
// goroutines: an Acquire on a handle that holds, from any goroutine,
// returns at once with the same grant and one more hold, and the lock is
// released by the Release that balances the first.
func WithReentrant() Option { return func(o *options) { o.reentrant = true } }

// WithACL sets the ACL of every node the handle creates (its lock nodes,
// their marks, and the lock's directory and missing parents), in place of
// the connection's (zk.WithACL, or its default). Default: the
// connection's. An entry without a scheme or permissions makes New fail
// with ErrInvalidOption.
func WithACL(acl ...zk.ACL) Option { return func(o *options) { o.acl = acl } }

// New returns a Lock on path (the lock's directory; it and missing parents
// are created as container nodes on first use). Nothing is sent to the
// server. It fails with an error matching zk.ErrInvalidPath for a bad path,
// and ErrClosed for a nil or closed connection.
func New(conn zk.Conn, path string, opts ...Option) (*Lock, error) {
	o := options{Options: contention.DefaultOptions("lock", ScopeName, Version)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	o.ID = cmp.Or(o.ID, uuid.NewString())
	o.Mutex = !o.reentrant
	if conn != nil { // nil: refused by contention.Open
		var err error
		if conn, err = zk.UseACL(conn, o.acl...); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
	}
	inst, err := contention.Open(conn, contention.Config{
		Dir:     path,
		Markers: []string{Marker},
		Data:    []byte(o.ID),
		Errors: contention.Errors{
			SessionLost:    ErrSessionLost,
			Suspended:      ErrSuspended,
			NodeDeleted:    ErrNodeDeleted,
			NotHeld:        ErrNotHeld,
			Closed:         ErrClosed,
			Released:       ErrReleased,
			CleanupPending: ErrCleanupPending,
			InvalidOption:  ErrInvalidOption,
		},
		NewID:     uuid.NewString,
		Revocable: o.revocable,
	}, o.Options)
	if err != nil {
		return nil, err
	}
	return &Lock{path: path, inst: inst}, nil
}

// Grant is one hold of the lock.
type Grant struct {
	l      *Lock
	term   uint64
	node   string
	token  int64
	loss   *runtime.Loss
	revoke *runtime.Signal
}

// Token is the fencing token: the czxid of our lock node. It is unique
// across the ensemble and grows with every grant of any lock, so a resource
// that remembers the highest token it saw can refuse a stale holder.
func (g *Grant) Token() int64 { return g.token }

// Node is the full path of our lock node.
func (g *Grant) Node() string { return g.node }

// Lost is closed when the hold ends or can no longer be trusted: Release,
// SUSPENDED (under the default policy), LOST, the lock node deleted, or
// Close. Err says which.
func (g *Grant) Lost() <-chan struct{} { return g.loss.Done() }

// Err is nil while the hold lasts; once Lost has closed it is why:
// ErrReleased, ErrSuspended, ErrSessionLost, ErrNodeDeleted or ErrClosed.
func (g *Grant) Err() error { return g.loss.Err() }

// RevokeRequested is closed when someone asked the holder to give the lock
// up (RequestRevoke, Curator's Revoker) while this grant held, on a lock
// made WithRevocable: its node's data became "__REVOKE__" or "unlock", or
// was so when the grant was given. The grant goes on until the holder
// releases it (or loses it); a holder that honours the request calls
// Release. On a lock that is not revocable it never closes.
func (g *Grant) RevokeRequested() <-chan struct{} { return g.revoke.Done() }

// Guard returns an op to put in a zk Multi beside a write: the multi fails
// (zk.ErrNoNode) unless our lock node still exists, so ZooKeeper itself
// refuses a holder whose grant ended.
func (g *Grant) Guard() *zk.CheckOp { return &zk.CheckOp{Path: g.node, Version: zk.AnyVersion} }

// Release gives back this hold, as Lock.Release does. ErrNotHeld, wrapping
// Err, once the hold has ended.
func (g *Grant) Release(ctx context.Context) error {
	return g.l.inst.Release(ctx, g.loss, contention.Release{Term: g.term})
}

// Acquire blocks until the lock is held, ctx ends, or the session is lost.
// On a handle that holds it waits until that hold is released (with
// WithReentrant, it returns at once with the same grant and one more
// hold). When ctx ends first it returns ctx.Err(), and nothing is left: our
// node is deleted (also when the grant raced the cancel).
func (l *Lock) Acquire(ctx context.Context) (*Grant, error) {
	_, g, err := l.acquire(ctx, false)
	return g, err
}

// TryAcquire takes the lock if no one else holds it or waits before us, and
// otherwise returns false at once (after one round of requests), leaving
// nothing behind. On a handle that holds it returns false with no request
// (with WithReentrant: true, one more hold).
func (l *Lock) TryAcquire(ctx context.Context) (bool, *Grant, error) {
	return l.acquire(ctx, true)
}

func (l *Lock) acquire(ctx context.Context, try bool) (bool, *Grant, error) {
	r, err := l.inst.Acquire(ctx, contention.Acquire{Try: try}, nil)
	if err != nil || !r.Granted {
		return false, nil, err
	}
	return true, &Grant{l: l, term: r.Grant.Term, node: r.Grant.Node, token: r.Grant.Token, loss: r.Loss, revoke: r.Revoke}, nil
}

// Release gives back the handle's hold (with WithReentrant, one hold; the
// last one lets go). Our node is deleted, and Release returns once it is
// gone (or ctx ends: the delete then goes on in the background).
// ErrNotHeld when the handle holds nothing; also after the hold was lost,
// which a handle that is no WithReentrant one still releases so: until
// then its next Acquire waits.
func (l *Lock) Release(ctx context.Context) error {
	return l.inst.Release(ctx, nil, contention.Release{})
}

// Path is the lock's directory, as given to New.
func (l *Lock) Path() string { return l.path }

// ID is the handle's id: WithID's, or a random uuid.
func (l *Lock) ID() string { return l.inst.ID() }

// State is the lock machine's state: START, OFFER, DETERMINE, READY, LEADER
// (held), FAILED or STOP.
func (l *Lock) State() events.State { return l.inst.State() }

// Subscribe returns a subscription to the lock's lifecycle events. Close it
// when done.
func (l *Lock) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return l.inst.Subscribe(opts...)
}

// Close releases what the handle holds, fails its waiting calls with
// ErrClosed, deletes its nodes (waiting at most the close timeout) and stops
// it. Subscriptions end. When the connection is down, Close returns
// ErrCleanupPending after the close timeout and the connection deletes the
// nodes once the same session is back. Safe to call more than once: later
// calls return the first one's result.
func (l *Lock) Close() error { return l.inst.Close() }
