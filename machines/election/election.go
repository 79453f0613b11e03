package election

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ScopeName is the instrumentation scope of the election's spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/election"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// Node name markers: Curator LeaderLatch's and LeaderSelector's.
const (
	latchMarker    = "latch-"
	selectorMarker = "lock-"
)

var markers = []string{latchMarker, selectorMarker}

// Errors of the election. Match them with errors.Is; those of the same
// name in the root package zkrecipes match them too.
var (
	// ErrSessionLost: the session expired (or was replaced) while
	// campaigning or leading.
	ErrSessionLost = fmt.Errorf("election: %w", zkrecipes.ErrSessionLost)
	// ErrSuspended: the connection was lost while leading, which ends the
	// term under the default policy.
	ErrSuspended = fmt.Errorf("election: %w", zkrecipes.ErrSuspended)
	// ErrNodeDeleted: our election node was deleted by someone else.
	ErrNodeDeleted = fmt.Errorf("election: election %w by another client", zkrecipes.ErrNodeDeleted)
	// ErrClosed: the Election, or its connection, is closed (or nil).
	ErrClosed = fmt.Errorf("election: %w", zkrecipes.ErrClosed)
	// ErrResigned: the term ended by Resign, or by Run's function returning
	// (Term.Err).
	ErrResigned = errors.New("election: resigned")
	// ErrCleanupPending: Close could not delete our node within its close
	// timeout (the connection is down). The connection deletes it when the
	// same session reconnects, or the session's end does.
	ErrCleanupPending = fmt.Errorf("election: %w", zkrecipes.ErrCleanupPending)
	// ErrInvalidOption: New refused an option's value.
	ErrInvalidOption = fmt.Errorf("election: %w", zkrecipes.ErrInvalidOption)
	errNotLeading    = errors.New("election: not leading")
)

// Election is one participant's handle on an election. Its methods are
// safe for concurrent use.
type Election struct {
	conn zk.Conn
	path string
	cfg  options
	inst *contention.Instance

	startOnce sync.Once                              // starts follower (Observe), or marks that none will (Close)
	follower  *runtime.Shell[followInput, followCmd] // follows the leader for Observe; started by the first
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error // Close's result
}

// Option configures an Election.
// A nil Option is ignored.
type Option func(*options)

type options struct {
	contention.Options
	requeue bool
	acl     []zk.ACL
}

// WithID is this participant's id, stored as its node's data and reported
// by Leader, Participants and Observe. Default: a random uuid.
func WithID(id string) Option { return func(o *options) { o.ID = id } }

// WithTracerProvider sets where spans go. Default: otel's global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.TracerProvider = tp }
}

// WithMeterProvider sets where measurements go (the ZooKeeper requests'
// db.client.operation.duration, the terms' zkrecipes.hold.duration).
// Default: otel's global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.MeterProvider = mp }
}

// WithSuspendedIsLost says whether a lost connection (SUSPENDED) already
// ends a term. Default true; with false only LOST ends it.
func WithSuspendedIsLost(lost bool) Option { return func(o *options) { o.SuspendedIsLost = lost } }

// WithRequeue makes Run campaign again after each term ends (resigned,
// lost or failed) until its ctx ends. Default false: Run returns after one
// term.
func WithRequeue(requeue bool) Option { return func(o *options) { o.requeue = requeue } }

// WithCloseTimeout bounds how long Close waits for our node to be deleted.
// Default 10s; it must be positive (ErrInvalidOption). What is not deleted
// by then is deleted by the connection when the same session reconnects
// (Close returns ErrCleanupPending), or by the session's end.
func WithCloseTimeout(d time.Duration) Option { return func(o *options) { o.CloseTimeout = d } }

// WithACL sets the ACL of every node the participant creates (its
// election node, its marks, and the election's path and missing parents),
// in place of the connection's (zk.WithACL, or its default). Default: the
// connection's. An entry without a scheme or permissions makes New fail
// with ErrInvalidOption.
func WithACL(acl ...zk.ACL) Option { return func(o *options) { o.acl = acl } }

// New returns a participant in the election at path (created, with missing
// parents, as container nodes on first use). Nothing is sent to the server.
// Errors: zk.ErrInvalidPath for a bad path, ErrClosed for a nil or closed
// connection.
func New(conn zk.Conn, path string, opts ...Option) (*Election, error) {
	o := options{Options: contention.DefaultOptions("election", ScopeName, Version)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.ID == "" {
		o.ID = uuid.NewString() // our node's data: fixed here, before Open
	}
	if conn != nil { // nil: refused by contention.Open
		var err error
		if conn, err = zk.UseACL(conn, o.acl...); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
	}
	inst, err := contention.Open(conn, contention.Config{
		Dir:     path,
		Markers: markers,
		Data:    []byte(o.ID),
		// A term lasts long enough for the hold mark's write; the
		// release is then a plain delete, the cheapest hand-over.
		HoldMarks: true,
		Errors: contention.Errors{
			SessionLost:    ErrSessionLost,
			Suspended:      ErrSuspended,
			NodeDeleted:    ErrNodeDeleted,
			NotHeld:        errNotLeading,
			Closed:         ErrClosed,
			Released:       ErrResigned,
			CleanupPending: ErrCleanupPending,
			InvalidOption:  ErrInvalidOption,
		},
		NewID: uuid.NewString,
	}, o.Options)
	if err != nil {
		return nil, err
	}
	return &Election{conn: conn, path: path, cfg: o, closed: make(chan struct{}), inst: inst}, nil
}

// ID is this participant's id.
func (e *Election) ID() string { return e.cfg.ID }

// Path is the election's path.
func (e *Election) Path() string { return e.path }

// Term is one term of leadership.
type Term struct {
	e     *Election
	n     uint64
	node  string
	token int64
	loss  *runtime.Loss
}

// Token is the fencing token: the czxid of our election node, growing with
// every term of every participant.
func (t *Term) Token() int64 { return t.token }

// Node is the full path of our election node.
func (t *Term) Node() string { return t.node }

// Lost is closed when the term ends or leadership can no longer be trusted:
// Resign, SUSPENDED (default policy), LOST, our node deleted, or Close. Err
// says which.
func (t *Term) Lost() <-chan struct{} { return t.loss.Done() }

// Err is nil while the term lasts; once Lost has closed it is why:
// ErrResigned, ErrSuspended, ErrSessionLost, ErrNodeDeleted or ErrClosed.
func (t *Term) Err() error { return t.loss.Err() }

// Guard returns an op to put in a zk Multi beside a write: the multi fails
// (zk.ErrNoNode) unless our election node still exists, so ZooKeeper itself
// refuses a leader whose term ended.
func (t *Term) Guard() *zk.CheckOp { return &zk.CheckOp{Path: t.node, Version: zk.AnyVersion} }

// Release ends this term as Resign does; once the term has ended it is a
// no-op (a later term is left alone). ErrClosed after Close.
func (t *Term) Release(ctx context.Context) error {
	if err := t.e.Err(); err != nil {
		return err
	}
	return t.e.resign(ctx, t.n)
}

type termKey struct{}

// TermFrom returns the term that Run gave fn in its ctx (nil for any other
// ctx), so that fn can fence its writes with Token or Guard.
func TermFrom(ctx context.Context) *Term {
	t, _ := ctx.Value(termKey{}).(*Term)
	return t
}

// Campaign blocks until we lead, ctx ends (ctx.Err(); our node is
// deleted), or the session is lost (ErrSessionLost). While we lead it
// returns the current term at once.
func (e *Election) Campaign(ctx context.Context) (*Term, error) {
	return e.campaign(ctx, latchMarker)
}

func (e *Election) campaign(ctx context.Context, marker string) (*Term, error) {
	ctx, span := e.inst.StartSpan(ctx, "campaign")
	defer span.End()
	r, err := e.inst.Do(ctx, func(req uint64) contention.Input {
		return contention.Acquire{Req: req, Marker: marker}
	})
	if err != nil {
		e.inst.SpanError(span, err)
		return nil, err
	}
	e.inst.SpanGrant(span, r.Grant)
	return &Term{e: e, n: r.Grant.Term, node: r.Grant.Node, token: r.Grant.Token, loss: r.Loss}, nil
}

// Resign ends our term at once: our node is deleted with a plain delete
// (the next participant knows from our hold mark that we led, and leads
// with no read; the mark is deleted after the node), and Resign returns
// once it is gone, or when ctx ends (the delete goes on in the
// background). It is a no-op when we do not lead, so it may be called
// again after a failure.
func (e *Election) Resign(ctx context.Context) error { return e.resign(ctx, 0) }

// resign ends term n (0: the current one, if any).
func (e *Election) resign(ctx context.Context, n uint64) error {
	ctx, span := e.inst.StartSpan(ctx, "resign")
	defer span.End()
	_, err := e.inst.Do(ctx, func(req uint64) contention.Input { return contention.Release{Req: req, All: true, Term: n} })
	if errors.Is(err, errNotLeading) {
		return nil
	}
	e.inst.SpanError(span, err)
	return err
}

// Run campaigns (selector style) and calls fn while we lead. fn's ctx
// carries the term (TermFrom) and is cancelled the moment leadership is
// lost or ctx ends; context.Cause of it then says why (the term's Err:
// ErrSuspended under the default policy, ErrSessionLost, ErrNodeDeleted,
// ErrClosed; or ctx's cause). When fn returns we resign. When ctx ends,
// campaigning or leading, Run returns nil, as queue's Consume does, unless
// fn returned an error of its own (its ctx's error is not one). Otherwise
// it returns fn's error, or, when the term was lost and fn returned nil or
// its ctx's error, the term's Err, so a lost session never looks like a
// normal finish. A failed campaign returns its error. With WithRequeue it
// campaigns again after each term until ctx ends, but not after a campaign
// the server refused for the connection's identity (zk.ErrNoAuth), which
// every later one would be too: Run returns that error.
func (e *Election) Run(ctx context.Context, fn func(ctx context.Context) error) error {
	for {
		term, err := e.campaign(ctx, selectorMarker)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && e.cfg.requeue && !errors.Is(err, ErrClosed) && !errors.Is(err, zk.ErrNoAuth):
			continue // the session was lost while waiting: queue again
		case err != nil:
			return err
		}
		lead, cancel := context.WithCancelCause(context.WithValue(ctx, termKey{}, term))
		go func() {
			select {
			case <-term.Lost():
				cancel(term.Err())
			case <-lead.Done():
			}
		}()
		ferr := fn(lead)
		if errors.Is(ferr, lead.Err()) {
			ferr = nil // fn stopped on its ctx: no error of its own
		}
		cancel(nil)
		lost := term.Err()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.CloseTimeout)
		rerr := e.Resign(rctx)
		rcancel()
		switch {
		case ctx.Err() != nil:
			return ferr
		case !e.cfg.requeue:
			return cmp.Or(ferr, lost, rerr)
		}
	}
}

// State is our machine's state: START, OFFER, DETERMINE, READY, LEADER,
// FAILED or STOP.
func (e *Election) State() events.State { return e.inst.State() }

// Subscribe returns a subscription to our lifecycle events. Close it when
// done.
func (e *Election) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return e.inst.Subscribe(opts...)
}

// Err is ErrClosed once the election is closed, nil before. It tells why an
// Observe channel closed when its ctx had not ended.
func (e *Election) Err() error {
	select {
	case <-e.closed:
		return ErrClosed
	default:
		return nil
	}
}

// Close resigns, withdraws any campaign (waiting calls fail with
// ErrClosed), deletes our node (waiting at most the close timeout), ends
// Observe streams and subscriptions. When the connection is down, it
// returns ErrCleanupPending after the close timeout and the connection
// deletes the node once the same session is back. Safe to call more than
// once, concurrently too: every call returns the first one's result.
func (e *Election) Close() error {
	e.closeOnce.Do(func() {
		close(e.closed)
		e.startOnce.Do(func() {}) // no follower starts from now on
		e.closeErr = e.inst.Close()
		if e.follower != nil {
			e.follower.Stop() // ends the streams and waits for them
		}
	})
	return e.closeErr
}
