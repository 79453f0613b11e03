package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Errors of NewMulti's input. Match them with errors.Is.
var (
	// ErrNoPaths: NewMulti was given no paths.
	ErrNoPaths = errors.New("lock: no paths")
	// ErrDuplicatePath: NewMulti was given a path twice.
	ErrDuplicatePath = errors.New("lock: duplicate path")
)

// Multi is a handle on several locks held as one (Apache Curator's
// InterProcessMultiLock): Acquire takes every one of them or none. The
// locks are always taken in sorted path order, whatever order NewMulti was
// given them in, so two Multis over the same locks never wait on each other
// in a cycle. Like Lock it is a mutex across goroutines: Acquire on a Multi
// that holds waits until that hold is released (WithReentrant: it counts
// one more hold, and the Release that balances the first lets go of every
// lock). Its methods are safe for concurrent use; its calls run one at a
// time.
type Multi struct {
	id     string
	paths  []string // as given to NewMulti
	locks  []*Lock  // in sorted path order
	order  []int    // order[i]: the index in locks of paths[i]
	tracer trace.Tracer
	wait   time.Duration // how long cleanup waits for a release: the parts' close timeout

	turn      chan struct{} // one call at a time; a send takes the turn
	hold      chan struct{} // not reentrant: holds a token while the Multi holds
	reentrant bool
	done      chan struct{} // closed by Close

	mu    sync.Mutex  // held and holds: changed with the turn taken, read by Close
	held  *MultiGrant // the current grant, nil when none
	holds int         // re-entrant holds of held

	bus *events.Joined // START, then the parts' events

	closeOnce sync.Once
	closeErr  error
}

// NewMulti returns a Multi on the locks at paths (each a lock's directory,
// as in New), each with opts (WithID names each part: the id, "/" and its
// path). Nothing is sent to the server. Errors, before anything else is
// done: ErrNoPaths for no paths, an error matching zk.ErrInvalidPath for a
// bad one, ErrDuplicatePath for a path given twice, ErrInvalidOption, and
// ErrClosed for a nil or closed connection.
func NewMulti(conn zk.Conn, paths []string, opts ...Option) (*Multi, error) {
	if len(paths) == 0 {
		return nil, ErrNoPaths
	}
	for i, p := range paths {
		if err := zk.ValidatePath(p); err != nil {
			return nil, fmt.Errorf("lock: %w", err)
		}
		if p == "/" {
			return nil, fmt.Errorf("lock: %w %q: the root cannot be a lock", zk.ErrInvalidPath, p)
		}
		if slices.Contains(paths[:i], p) {
			return nil, fmt.Errorf("%w: %s", ErrDuplicatePath, p)
		}
	}
	sorted := slices.Clone(paths)
	slices.Sort(sorted)
	o := options{Options: contention.DefaultOptions("lock", ScopeName, Version)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	m := &Multi{id: cmp.Or(o.ID, uuid.NewString()), paths: slices.Clone(paths), turn: make(chan struct{}, 1),
		hold: make(chan struct{}, 1), reentrant: o.reentrant, done: make(chan struct{})}
	for _, p := range sorted {
		l, err := New(conn, p, append(slices.Clone(opts), WithID(m.id+"/"+p))...)
		if err != nil {
			for _, opened := range m.locks {
				opened.Close()
			}
			return nil, err
		}
		m.locks = append(m.locks, l)
	}
	for _, p := range paths {
		m.order = append(m.order, slices.Index(sorted, p))
	}
	m.tracer = m.locks[0].inst.Telemetry().Tracer()
	m.wait = o.CloseTimeout
	parts := make([]events.Source, len(m.locks))
	for i, l := range m.locks {
		parts[i] = l
	}
	m.bus = events.Join(events.Event{Time: time.Now(), Recipe: "lock", Path: m.Path(), Instance: m.id, Type: events.Start, State: events.StateStart}, parts...)
	return m, nil
}

// Path is the Multi's paths, as given to NewMulti, joined by commas.
func (m *Multi) Path() string { return strings.Join(m.paths, ",") }

// ID is the Multi's id: WithID's, or a random uuid. Its locks' ids are it,
// "/" and their paths.
func (m *Multi) ID() string { return m.id }

// State is LEADER when every lock is held, and otherwise the state of the
// first lock (in sorted path order) that is not: START, OFFER, ...
func (m *Multi) State() events.State {
	for _, l := range m.locks {
		if s := l.State(); s != events.StateLeader {
			return s
		}
	}
	return events.StateLeader
}

// Subscribe returns a subscription to the Multi's lifecycle events: its
// own START, then every event of its locks (each naming its lock's path).
// Close it when done.
func (m *Multi) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return m.bus.Subscribe(opts...)
}

// MultiGrant is one hold of every lock of a Multi.
type MultiGrant struct {
	m      *Multi
	grants []*Grant // in the order of NewMulti's paths
	loss   *runtime.Loss
}

// PartError is why a MultiGrant ended when one of its locks was lost
// (MultiGrant.Err): which lock, and its Grant.Err.
type PartError struct {
	Path string
	Err  error
}

func (e *PartError) Error() string { return "lock: " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the lock's Grant.Err (ErrSuspended, ErrSessionLost, ...).
func (e *PartError) Unwrap() error { return e.Err }

// Grants are the grants of the locks, in the order of the paths given to
// NewMulti. Each has its own fencing token.
func (g *MultiGrant) Grants() []*Grant { return slices.Clone(g.grants) }

// Lost is closed when the hold of any of the locks ends or can no longer be
// trusted (see Grant.Lost), or the Multi is released or closed. The other
// locks are still held until Release or Close.
func (g *MultiGrant) Lost() <-chan struct{} { return g.loss.Done() }

// Err is nil while every lock is held; once Lost has closed it is why:
// ErrReleased, ErrClosed, or a *PartError naming the lock that was lost
// and wrapping its cause (errors.Is(err, ErrSessionLost) works).
func (g *MultiGrant) Err() error { return g.loss.Err() }

// Release gives back this hold, as Multi.Release does. ErrNotHeld once
// it has ended.
func (g *MultiGrant) Release(ctx context.Context) error { return g.m.releaseSpan(ctx, g) }

// newMultiGrant returns the grant of the parts' grants (in sorted path
// order), watching each: the first that is lost ends it.
func (m *Multi) newMultiGrant(sorted []*Grant) *MultiGrant {
	g := &MultiGrant{m: m, loss: runtime.NewLoss()}
	for _, i := range m.order {
		g.grants = append(g.grants, sorted[i])
	}
	for i, part := range sorted {
		go func() {
			select {
			case <-part.Lost():
				g.loss.Close(&PartError{Path: m.locks[i].path, Err: part.Err()})
			case <-g.loss.Done():
			}
		}()
	}
	return g
}

// take waits for the Multi's turn; done gives it back.
func (m *Multi) take(ctx context.Context) (done func(), err error) {
	select {
	case m.turn <- struct{}{}:
		return func() { <-m.turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Acquire blocks until every lock is held, ctx ends, or one of them fails;
// the locks are taken one after the other, in sorted path order. On a
// Multi that holds it waits until that hold is released (WithReentrant: it
// returns at once with the same grant and one more hold). When ctx ends first, or a lock fails (ErrSessionLost, ...), it
// releases the locks it took before returning the error, waiting for that
// at most the parts' close timeout (WithCloseTimeout: then their nodes are
// deleted in the background), and nothing of this call is left. A grant
// that was lost is let go of before a new one is sought.
func (m *Multi) Acquire(ctx context.Context) (*MultiGrant, error) {
	ctx, span := m.tracer.Start(ctx, "lock.multi_acquire", trace.WithAttributes(runtime.AttrDBSystem.String(runtime.DBSystem),
		runtime.AttrRecipe.String("lock"), attribute.StringSlice("zkrecipes.paths", m.paths)))
	defer span.End()
	g, err := m.acquire(ctx)
	m.locks[0].inst.SpanError(span, err)
	return g, err
}

func (m *Multi) acquire(ctx context.Context) (*MultiGrant, error) {
	if m.closed() {
		return nil, ErrClosed
	}
	if m.reentrant {
		return m.acquireTurn(ctx)
	}
	select {
	case m.hold <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.done:
		return nil, ErrClosed
	}
	g, err := m.acquireTurn(ctx)
	if err != nil {
		<-m.hold
	}
	return g, err
}

// closed reports whether Close was called.
func (m *Multi) closed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// acquireTurn acquires in the Multi's turn.
func (m *Multi) acquireTurn(ctx context.Context) (*MultiGrant, error) {
	done, err := m.take(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if g := m.current(); g != nil {
		if g.Err() == nil {
			m.setHeld(g, m.holds+1)
			return g, nil
		}
		m.letGo(ctx) // what is left of a lost grant
	}
	var got []*Grant
	for _, l := range m.locks {
		g, err := l.Acquire(ctx)
		if err != nil {
			m.releaseParts(ctx, len(got))
			return nil, err
		}
		got = append(got, g)
	}
	if m.closed() {
		m.releaseParts(ctx, len(got))
		return nil, ErrClosed
	}
	g := m.newMultiGrant(got)
	m.setHeld(g, 1)
	return g, nil
}

// current is the current grant, nil when none.
func (m *Multi) current() *MultiGrant {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

// setHeld makes g, with holds holds, the current grant (nil: none).
func (m *Multi) setHeld(g *MultiGrant, holds int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held, m.holds = g, holds
}

// releaseParts releases the first n locks, last first, on a context of
// their own: the caller's may have ended, and what it took must go. It
// waits for that at most m.wait; the locks delete their nodes in the
// background after that.
func (m *Multi) releaseParts(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.wait)
	defer cancel()
	var errs []error
	for i := n - 1; i >= 0; i-- {
		if err := m.locks[i].Release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, fmt.Errorf("lock: %s: %w", m.locks[i].path, err))
		}
	}
	return errors.Join(errs...)
}

// letGo drops the current grant and releases the locks it still holds.
func (m *Multi) letGo(ctx context.Context) error {
	m.setHeld(nil, 0)
	return m.releaseParts(ctx, len(m.locks))
}

// Release gives back one hold; the last one releases every lock, last
// taken first, and returns once their nodes are gone (or ctx ends: the
// deletes then go on in the background). ErrNotHeld when the Multi holds
// nothing; also when its grant was lost (MultiGrant.Err), and the error
// then wraps why, after the locks still held were released.
func (m *Multi) Release(ctx context.Context) error { return m.releaseSpan(ctx, nil) }

// releaseSpan gives back one hold, g's or (nil) the Multi's, in a span.
func (m *Multi) releaseSpan(ctx context.Context, g *MultiGrant) error {
	ctx, span := m.tracer.Start(ctx, "lock.multi_release", trace.WithAttributes(runtime.AttrDBSystem.String(runtime.DBSystem),
		runtime.AttrRecipe.String("lock"), attribute.StringSlice("zkrecipes.paths", m.paths)))
	defer span.End()
	err := m.release(ctx, g)
	m.locks[0].inst.SpanError(span, err)
	return err
}

func (m *Multi) release(ctx context.Context, mine *MultiGrant) error {
	if m.closed() {
		return ErrClosed
	}
	done, err := m.take(ctx)
	if err != nil {
		return err
	}
	defer done()
	g := m.current()
	if g == nil || (mine != nil && mine != g) {
		return ErrNotHeld
	}
	if !m.reentrant {
		defer func() { <-m.hold }() // after the turn: the hold ends here
	}
	switch {
	case g.Err() != nil:
		cause := g.Err()
		return errors.Join(fmt.Errorf("%w: %w", ErrNotHeld, cause), m.letGo(ctx))
	case m.holds > 1:
		m.setHeld(g, m.holds-1)
		return nil
	default:
		g.loss.Close(ErrReleased)
		m.setHeld(nil, 0)
		var errs []error
		for i := len(m.locks) - 1; i >= 0; i-- {
			if err := m.locks[i].Release(ctx); err != nil {
				errs = append(errs, fmt.Errorf("lock: %s: %w", m.locks[i].path, err))
			}
		}
		return errors.Join(errs...)
	}
}

// Close releases what the Multi holds, fails its waiting Acquire with
// ErrClosed, and closes every lock (see Lock.Close: ErrCleanupPending when
// the connection is down). Later calls return the first one's result.
func (m *Multi) Close() error {
	m.closeOnce.Do(func() {
		close(m.done)
		if g := m.current(); g != nil {
			g.loss.Close(ErrClosed) // before its locks go, which would say lost
		}
		var errs []error
		for i := len(m.locks) - 1; i >= 0; i-- {
			errs = append(errs, m.locks[i].Close())
		}
		m.closeErr = errors.Join(errs...)
		if errors.Is(m.closeErr, ErrCleanupPending) {
			m.closeErr = ErrCleanupPending
		}
		m.bus.Close()
	})
	return m.closeErr
}
