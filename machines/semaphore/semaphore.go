package semaphore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ScopeName is the instrumentation scope of the semaphore's spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/semaphore"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// Marker is the name marker of a lease node, Curator's: lease nodes are
// <path>/leases/_c_<uuid>-lease-<seq10>.
const Marker = "lease-"

// LeasesDir is the directory of the lease nodes under a semaphore's path,
// Curator's InterProcessSemaphoreV2 layout.
func LeasesDir(path string) string { return zk.Join(path, "leases") }

// Errors of the semaphore. Match them with errors.Is; those of the same
// name in the root package zkrecipes match them too.
var (
	// ErrSessionLost: the session expired (or was replaced) while acquiring
	// or holding; the lease is gone.
	ErrSessionLost = fmt.Errorf("semaphore: %w", zkrecipes.ErrSessionLost)
	// ErrSuspended: the connection was lost while holding, and the
	// semaphore counts that as losing the lease (the default policy).
	ErrSuspended = fmt.Errorf("semaphore: %w", zkrecipes.ErrSuspended)
	// ErrNodeDeleted: our lease node was deleted by someone else.
	ErrNodeDeleted = fmt.Errorf("semaphore: lease %w by another client", zkrecipes.ErrNodeDeleted)
	// ErrNotHeld: Release of a lease that is no longer held (released
	// already, or lost).
	ErrNotHeld = errors.New("semaphore: lease not held")
	// ErrClosed: the Semaphore, or its connection, is closed (or the
	// connection is nil).
	ErrClosed = fmt.Errorf("semaphore: %w", zkrecipes.ErrClosed)
	// ErrReleased: the lease ended by Release (Lease.Err).
	ErrReleased = errors.New("semaphore: released")
	// ErrCleanupPending: Close could not delete the semaphore's nodes
	// within its close timeout (the connection is down). The connection
	// deletes them when the same session reconnects, or the session's end
	// does.
	ErrCleanupPending = fmt.Errorf("semaphore: %w", zkrecipes.ErrCleanupPending)
	// ErrInvalidOption: New refused an argument or an option's value:
	// maxLeases below 1, a close timeout that is not positive; and
	// AcquireN refused its n (below 1 or above maxLeases).
	ErrInvalidOption = fmt.Errorf("semaphore: %w", zkrecipes.ErrInvalidOption)
	// ErrMaxLeasesMismatch: the semaphore's path records another
	// maxLeases than ours (its data, in decimal). Nothing was created.
	ErrMaxLeasesMismatch = errors.New("semaphore: maxLeases mismatch")
	// ErrMaxLeasesUnknown: Holders found no maxLeases recorded at the
	// path (a path used only by Curator, which records none), so it
	// cannot tell holders from waiters.
	ErrMaxLeasesUnknown = errors.New("semaphore: maxLeases unknown")
)

// Semaphore is a handle on a distributed counting semaphore: at most
// maxLeases leases are held at once, over every handle and process on the
// path. One handle may hold several leases at once; each lease is one
// contender, run by one of the handle's machines (a pool: one per lease
// held or wanted at once, reused after).
// Its methods are safe for concurrent use.
type Semaphore struct {
	conn zk.Conn
	path string
	max  int
	o    options
	tel  *runtime.Telemetry // the handle's spans: "semaphore.acquire <path>", ...
	rq   zk.Conn            // conn, its requests traced (the maxLeases check)
	bus  *events.Bus
	nmu  chan struct{} // one AcquireN at a time per handle
	fwd  sync.WaitGroup

	closeOnce sync.Once
	closeErr  error // Close's result

	mu      sync.Mutex
	closed  bool
	checked bool           // the path's maxLeases was checked (or recorded)
	opened  int            // instances opened, to name them
	idle    []*slot        // instances holding nothing
	busy    map[*slot]bool // instances acquiring, holding or releasing
	all     []*slot        // every instance, for Close
	last    *slot          // the instance of the latest call, for State
}

// slot is one instance of the pool and the lease it holds (nil while it
// acquires or releases).
type slot struct {
	inst  *contention.Instance
	lease *Lease
}

// Option configures a Semaphore.
// A nil Option is ignored.
type Option func(*options)

// options are what the Options set: the contention engine's, and the
// ACL.
type options struct {
	contention.Options
	acl []zk.ACL
}

// WithID names this handle: its lease nodes' data (what Holders reports as
// Holder.ID) and, followed by "/" and the instance's number, its lifecycle
// events' Instance. Default: a random uuid.
func WithID(id string) Option { return func(o *options) { o.ID = id } }

// WithTracerProvider sets where spans go. Default: otel's global provider
// (a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.TracerProvider = tp }
}

// WithMeterProvider sets where measurements go (the ZooKeeper requests'
// db.client.operation.duration, the leases' zkrecipes.hold.duration).
// Default: otel's global provider (a no-op until the application installs
// one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.MeterProvider = mp }
}

// WithSuspendedIsLost says whether a lost connection (SUSPENDED) already
// ends a lease. Default true: the session might have expired, so the lease
// cannot be trusted. With false, only LOST (expiry) ends it, and a lease
// survives short connection losses at the risk described in the package
// doc.
func WithSuspendedIsLost(lost bool) Option {
	return func(o *options) { o.SuspendedIsLost = lost }
}

// WithCloseTimeout bounds how long Close waits for the semaphore's nodes
// to be deleted, and how long AcquireN waits for the leases it took to be
// given back when it fails. Default 10s; it must be positive
// (ErrInvalidOption). What is not deleted by then is deleted by the
// connection when the same session reconnects (Close returns
// ErrCleanupPending), or by the session's end.
func WithCloseTimeout(d time.Duration) Option {
	return func(o *options) { o.CloseTimeout = d }
}

// WithACL sets the ACL of every node the handle creates (its lease nodes,
// their marks, the semaphore's path with its maxLeases and missing
// parents), in place of the connection's (zk.WithACL, or its default).
// Default: the connection's. An entry without a scheme or permissions
// makes New fail with ErrInvalidOption.
func WithACL(acl ...zk.ACL) Option { return func(o *options) { o.acl = acl } }

// New returns a Semaphore of maxLeases leases on path. Nothing is sent to
// the server: the first acquire checks the maxLeases recorded at path, or
// records it (see the package doc). Errors: zk.ErrInvalidPath for a bad
// path (empty, relative, a trailing slash, or "/"), ErrInvalidOption for
// maxLeases below 1 or a bad option, ErrClosed for a nil or closed
// connection.
func New(conn zk.Conn, path string, maxLeases int, opts ...Option) (*Semaphore, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, fmt.Errorf("semaphore: %w", err)
	}
	if path == "/" {
		return nil, fmt.Errorf("semaphore: %w %q: the root cannot be a semaphore", zk.ErrInvalidPath, path)
	}
	if maxLeases < 1 {
		return nil, fmt.Errorf("%w: maxLeases %d: it must be at least 1", ErrInvalidOption, maxLeases)
	}
	o := options{Options: contention.DefaultOptions("semaphore", ScopeName, Version)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.ID == "" {
		o.ID = uuid.NewString() // our nodes' data: fixed here, for every instance
	}
	if conn != nil { // nil: refused by contention.Open
		var err error
		if conn, err = zk.UseACL(conn, o.acl...); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
	}
	s := &Semaphore{conn: conn, path: path, max: maxLeases, o: o, bus: events.NewBus(),
		nmu: make(chan struct{}, 1), busy: make(map[*slot]bool)}
	// The handle's own START, named by its id: the bus keeps it for every
	// subscriber, whose first event it is.
	s.bus.Publish(events.Event{Time: time.Now(), Recipe: "semaphore", Path: LeasesDir(path), Instance: o.ID,
		Type: events.Start, State: events.StateStart})
	// The first instance checks the connection and the options, and
	// waits in the pool for the first acquire.
	sl, err := s.open()
	if err != nil {
		return nil, err
	}
	s.tel = runtime.NewTelemetry(conn, runtime.TelemetryConfig{
		TracerProvider: o.TracerProvider, MeterProvider: o.MeterProvider,
		Scope: ScopeName, Version: Version, Recipe: "semaphore", Path: path, Instance: o.ID,
	})
	s.rq = runtime.TraceConn(conn, s.tel, sl.inst.ErrorType)
	s.idle = append(s.idle, sl)
	s.last = sl
	return s, nil
}

// open starts one more instance of the pool. Nothing is sent to the
// server. Called with s.mu held, or before s is shared.
func (s *Semaphore) open() (*slot, error) {
	s.opened++
	o := s.o.Options
	o.ID = fmt.Sprintf("%s/%d", s.o.ID, s.opened)
	inst, err := contention.Open(s.conn, contention.Config{
		Dir:       LeasesDir(s.path),
		Markers:   []string{Marker},
		Data:      []byte(s.o.ID),
		Predicate: contention.Leases(s.max),
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
		NewID: uuid.NewString,
	}, o)
	if err != nil {
		return nil, err
	}
	sub := inst.Subscribe()
	s.fwd.Add(1)
	go func() { // ends when the instance stops: its bus closes sub.C
		defer s.fwd.Done()
		for ev := range sub.C {
			s.bus.Publish(ev)
		}
	}()
	sl := &slot{inst: inst}
	s.all = append(s.all, sl)
	return sl, nil
}

// take gives the caller an instance that holds nothing: an idle one, one
// whose lease was lost (its Release then says ErrNotHeld), or a new one.
func (s *Semaphore) take() (*slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var sl *slot
	if n := len(s.idle); n > 0 {
		sl, s.idle = s.idle[n-1], s.idle[:n-1]
	} else {
		for b := range s.busy {
			if b.lease != nil && b.lease.Err() != nil {
				b.lease = nil // lost and never released: reuse it
				sl = b
				break
			}
		}
	}
	if sl == nil {
		var err error
		if sl, err = s.open(); err != nil {
			return nil, err
		}
	}
	s.busy[sl] = true
	s.last = sl
	return sl, nil
}

// put gives back an instance that holds nothing.
func (s *Semaphore) put(sl *slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, sl)
	sl.lease = nil
	if !s.closed {
		s.idle = append(s.idle, sl)
	}
}

// check makes sure the path records our maxLeases, once per handle: it
// creates the path (and missing parents, as containers) with maxLeases as
// its data if it is missing, records it on a path with empty data
// (Curator's, which records nothing), accepts our number, and fails with
// ErrMaxLeasesMismatch, creating nothing, for anything else. A request whose reply was lost to
// a connection loss is made again (reading and creating the path are
// safe to repeat).
func (s *Semaphore) check(ctx context.Context) error {
	s.mu.Lock()
	done := s.checked
	s.mu.Unlock()
	if done {
		return nil
	}
	want := strconv.Itoa(s.max)
	// Each of these is a step of the check, not a failure.
	ctx = runtime.Expect(ctx, zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion)
	for {
		data, st, err := s.rq.Get(ctx, s.path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			data, err = []byte(want), s.record(ctx, []byte(want))
		case err == nil && len(data) == 0:
			// Curator's path: record ours, unless someone did meanwhile.
			data = []byte(want)
			_, err = s.rq.Set(ctx, s.path, data, st.Version)
		}
		switch {
		case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion),
			errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrConnectionLoss) && ctx.Err() == nil:
			continue // changed meanwhile, or a reply lost: read it again
		case errors.Is(err, zk.ErrClosed):
			return fmt.Errorf("%w: %w", ErrClosed, err)
		case err != nil:
			return err
		case string(data) != want:
			return fmt.Errorf("%w: %s records %q, we have %d", ErrMaxLeasesMismatch, s.path, data, s.max)
		}
		s.mu.Lock()
		s.checked = true
		s.mu.Unlock()
		return nil
	}
}

// record creates the path, persistent, with data, after its missing
// parents (containers). A path that exists is zk.ErrNodeExists.
func (s *Semaphore) record(ctx context.Context, data []byte) error {
	_, err := s.rq.Create(ctx, s.path, data, zk.ModePersistent)
	if errors.Is(err, zk.ErrNoNode) {
		if err = zk.EnsurePath(ctx, s.rq, zk.Parent(s.path), zk.ModeContainer); err != nil {
			return err
		}
		_, err = s.rq.Create(ctx, s.path, data, zk.ModePersistent)
	}
	return err
}

// Lease is one lease held.
type Lease struct {
	s     *Semaphore
	sl    *slot
	node  string
	token int64
	loss  *runtime.Loss
}

// Token is the fencing token: the czxid of our lease node. It is unique
// across the ensemble and grows with every grant, so a resource that
// remembers the tokens it saw can refuse a stale holder.
func (l *Lease) Token() int64 { return l.token }

// Node is the full path of our lease node.
func (l *Lease) Node() string { return l.node }

// Lost is closed when the lease ends or can no longer be trusted: Release,
// SUSPENDED (under the default policy), LOST, the lease node deleted, or
// Close. Err says which.
func (l *Lease) Lost() <-chan struct{} { return l.loss.Done() }

// Err is nil while the lease lasts; once Lost has closed it is why:
// ErrReleased, ErrSuspended, ErrSessionLost, ErrNodeDeleted or ErrClosed.
func (l *Lease) Err() error { return l.loss.Err() }

// Guard returns an op to put in a zk Multi beside a write: the multi fails
// (zk.ErrNoNode) unless our lease node still exists, so ZooKeeper itself
// refuses a holder whose lease ended.
func (l *Lease) Guard() *zk.CheckOp { return &zk.CheckOp{Path: l.node, Version: zk.AnyVersion} }

// Release gives the lease back: our node is deleted, and Release returns
// once it is gone (or ctx ends: the delete then goes on in the
// background). ErrNotHeld if the lease was released already or lost;
// ErrClosed after the Semaphore's Close.
func (l *Lease) Release(ctx context.Context) error {
	s := l.s
	ctx, span := s.tel.Start(ctx, "release", trace.SpanKindInternal, runtime.AttrNode.String(l.node))
	defer span.End()
	err := l.release(ctx)
	l.sl.inst.SpanError(span, err)
	return err
}

func (l *Lease) release(ctx context.Context) error {
	s := l.s
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrClosed
	case l.sl.lease != l:
		s.mu.Unlock()
		return ErrNotHeld
	}
	l.sl.lease = nil // releasing: neither idle nor reusable until done
	s.last = l.sl
	s.mu.Unlock()
	_, err := l.sl.inst.Do(ctx, func(req uint64) contention.Input { return contention.Release{Req: req} })
	s.put(l.sl)
	return err
}

// Acquire blocks until a lease is held, ctx ends, or the session is lost.
// When ctx ends first it returns ctx.Err(), and our node is deleted (also
// when the grant raced the cancel).
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	ctx, span := s.tel.Start(ctx, "acquire", trace.SpanKindInternal, s.spanAttrs(1)...)
	defer span.End()
	_, l, err := s.acquire(ctx, span, false)
	return l, err
}

// TryAcquire takes a lease if fewer than maxLeases contenders are queued
// before it, and otherwise returns false at once (after one round of
// requests), leaving nothing behind.
func (s *Semaphore) TryAcquire(ctx context.Context) (bool, *Lease, error) {
	ctx, span := s.tel.Start(ctx, "try_acquire", trace.SpanKindInternal, s.spanAttrs(1)...)
	defer span.End()
	return s.acquire(ctx, span, true)
}

// AcquireN takes n leases, all or none: it takes them one after the
// other (taking one again if one it took is lost meanwhile, so that all
// are held when it returns), and when one fails or ctx ends it releases
// those it took
// (waiting at most the close timeout for that) and returns the error.
// ErrInvalidOption for n below 1 or above maxLeases, before anything is
// sent. The AcquireN calls of one handle take turns; two processes whose
// AcquireN calls together want more than maxLeases can each hold part and
// wait for the rest (as with Curator's acquire(qty)): bound the wait with
// ctx.
func (s *Semaphore) AcquireN(ctx context.Context, n int) ([]*Lease, error) {
	if n < 1 || n > s.max {
		return nil, fmt.Errorf("%w: AcquireN(%d): n must be between 1 and maxLeases (%d)", ErrInvalidOption, n, s.max)
	}
	ctx, span := s.tel.Start(ctx, "acquire_n", trace.SpanKindInternal, s.spanAttrs(n)...)
	defer span.End()
	select {
	case s.nmu <- struct{}{}:
		defer func() { <-s.nmu }()
	case <-ctx.Done():
		s.spanError(span, ctx.Err())
		return nil, ctx.Err()
	}
	var ls []*Lease
	for len(ls) < n {
		_, l, err := s.acquire(ctx, nil, false)
		if err != nil {
			s.giveBack(ctx, ls)
			s.spanError(span, err)
			return nil, err
		}
		// A lease lost while we waited for the next (SUSPENDED, under
		// the default policy) is given back and taken again: all n are
		// held when AcquireN returns.
		ls = slices.DeleteFunc(append(ls, l), func(l *Lease) bool {
			if l.Err() == nil {
				return false
			}
			_ = l.release(ctx) // ErrNotHeld: its instance goes back to the pool
			return true
		})
	}
	return ls, nil
}

// giveBack releases ls after a failed AcquireN, waiting at most the close
// timeout, also when ctx has ended.
func (s *Semaphore) giveBack(ctx context.Context, ls []*Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.CloseTimeout)
	defer cancel()
	for _, l := range ls {
		// ErrNotHeld (lost meanwhile) and ErrClosed leave nothing to do;
		// a timeout leaves the delete to the instance, in the background.
		_ = l.Release(ctx)
	}
}

// Span attributes of the semaphore's calls.
const (
	AttrMaxLeases = attribute.Key("zkrecipes.semaphore.max_leases") // the semaphore's maxLeases
	AttrLeases    = attribute.Key("zkrecipes.semaphore.leases")     // how many leases the call wants
)

func (s *Semaphore) spanAttrs(n int) []attribute.KeyValue {
	return []attribute.KeyValue{AttrMaxLeases.Int(s.max), AttrLeases.Int(n)}
}

// spanError marks span as failed with err, if err is not nil: the Error
// status and error.type, named knowing the semaphore's errors.
func (s *Semaphore) spanError(span trace.Span, err error) {
	s.mu.Lock()
	inst := s.all[0].inst
	s.mu.Unlock()
	typ := inst.ErrorType(err)
	if errors.Is(err, ErrMaxLeasesMismatch) {
		typ = "max_leases_mismatch"
	}
	runtime.Fail(span, err, typ)
}

// acquire takes one lease; span, if not nil, is the call's span, told the
// outcome.
func (s *Semaphore) acquire(ctx context.Context, span trace.Span, try bool) (bool, *Lease, error) {
	fail := func(err error) (bool, *Lease, error) {
		if span != nil {
			s.spanError(span, err)
		}
		return false, nil, err
	}
	if s.isClosed() {
		return fail(ErrClosed)
	}
	if err := s.check(ctx); err != nil {
		return fail(err)
	}
	sl, err := s.take()
	if err != nil {
		return fail(err)
	}
	r, err := sl.inst.Do(ctx, func(req uint64) contention.Input { return contention.Acquire{Req: req, Try: try} })
	if err != nil || !r.Granted {
		s.put(sl)
		if err != nil {
			return fail(err)
		}
		if span != nil {
			span.SetAttributes(contention.AttrAcquired.Bool(false))
		}
		return false, nil, nil
	}
	l := &Lease{s: s, sl: sl, node: r.Grant.Node, token: r.Grant.Token, loss: r.Loss}
	s.mu.Lock()
	if s.closed {
		// Granted while Close ran (the handle's own leases, deleted
		// first, freed one): Close ends this instance and its node too.
		s.mu.Unlock()
		return fail(ErrClosed)
	}
	sl.lease = l
	s.mu.Unlock()
	if span != nil {
		sl.inst.SpanGrant(span, r.Grant)
	}
	return true, l, nil
}

func (s *Semaphore) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// MaxLeases is the number of leases the semaphore admits at once.
func (s *Semaphore) MaxLeases() int { return s.max }

// Path is the semaphore's path.
func (s *Semaphore) Path() string { return s.path }

// ID is the handle's id: WithID's, or the random one New chose.
func (s *Semaphore) ID() string { return s.o.ID }

// State sums up the handle's instances (one per lease held or wanted):
// LEADER while it holds a lease; else the furthest state of an acquire
// under way (READY, DETERMINE, OFFER); else that of the instance its
// latest call ran on: START before any, STOP after a Release or Close,
// FAILED after a lease was lost.
func (s *Semaphore) State() events.State {
	order := []events.State{events.StateOffer, events.StateDetermine, events.StateReady, events.StateLeader}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.last.inst.State()
	for _, sl := range s.all {
		if x := sl.inst.State(); slices.Index(order, x) > slices.Index(order, st) {
			st = x
		}
	}
	return st
}

// Subscribe returns a subscription to the lifecycle events of every
// instance of the handle (one per lease held or wanted at once; each
// event's Instance is the handle's id, "/", and the instance's number),
// after the handle's own START (Instance: the handle's id).
// Each instance's events come in order; those of different instances
// interleave. Close it when done.
func (s *Semaphore) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return s.bus.Subscribe(opts...)
}

// Close releases every lease the handle holds, fails its waiting calls
// with ErrClosed, deletes its nodes (waiting at most the close timeout)
// and stops its instances. Subscriptions end. When the connection is down,
// Close returns ErrCleanupPending after the close timeout and the
// connection deletes the nodes once the same session is back. Safe to call
// more than once: later calls return the first one's result.
func (s *Semaphore) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Semaphore) close() error {
	s.mu.Lock()
	s.closed = true
	all := s.all
	s.idle = nil
	s.mu.Unlock()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, sl := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sl.inst.Close()
		}()
	}
	wg.Wait()
	s.fwd.Wait()
	s.bus.Close()
	return errors.Join(errs...)
}
