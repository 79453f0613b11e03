package contention

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Options of an Instance: what every contention recipe lets its users set,
// through the recipe's own Option funcs, and what names its spans and
// events.
type Options struct {
	Recipe  string // "lock", "election": names spans and events
	Scope   string // the recipe's instrumentation scope (its import path)
	Version string // the recipe's version, reported with its spans

	ID              string               // the instance id shown on events; default a random uuid
	TracerProvider  trace.TracerProvider // where spans go; default otel's global provider
	MeterProvider   metric.MeterProvider // where measurements go; default otel's global provider
	SuspendedIsLost bool                 // SUSPENDED ends a grant (Config.SuspendedIsLost)
	CloseTimeout    time.Duration        // how long Close waits for our nodes to be deleted
	Mutex           bool                 // the handle is a mutex across goroutines (Acquire, Release)
}

// DefaultOptions are the defaults every recipe documents: SuspendedIsLost,
// a 10 s CloseTimeout, a random id and the global tracer and meter
// providers.
func DefaultOptions(recipe, scope, version string) Options {
	return Options{Recipe: recipe, Scope: scope, Version: version, SuspendedIsLost: true, CloseTimeout: 10 * time.Second}
}

// Instance runs a machine on a connection in a runtime.Shell: the shell
// runs the actor, the calls, the spans and the events; the Instance adds
// what only the contention engine knows — how its commands are made on
// ZooKeeper (exec), and Close's shutdown and hand-over. Its methods are
// safe for concurrent use.
type Instance struct {
	conn  zk.Conn
	opts  Options
	errs  Errors
	tel   *runtime.Telemetry
	shell *runtime.Shell[Input, command]

	closing   chan struct{} // closed when Close begins
	closeOnce sync.Once
	turn      chan struct{} // Options.Mutex: holds a token while the handle's hold lasts
	mu        sync.Mutex
	mine      *runtime.Loss // Options.Mutex: the hold that has the turn
}

// Result is a call's answer: the machine's reply, and for a grant its
// Loss, closed with the cause when the grant ends, and its Revoke signal,
// raised when its holder is asked to give it up (Config.Revocable).
type Result struct {
	Reply
	Loss   *runtime.Loss
	Revoke *runtime.Signal
}

// Open checks, before anything is sent, what every recipe checks — the
// directory (cfg.Dir) and the connection — and starts a machine for cfg on
// conn, with opts' defaults filled in and cfg.SuspendedIsLost from opts;
// the Instance owns the machine.
// Errors: zk.ErrInvalidPath (prefixed with opts.Recipe) or
// cfg.Errors.Closed for a nil or closed connection.
func Open(conn zk.Conn, cfg Config, opts Options) (*Instance, error) {
	if err := zk.ValidatePath(cfg.Dir); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Recipe, err)
	}
	if cfg.Dir == "/" {
		return nil, fmt.Errorf("%s: %w %q: the root cannot hold contenders", opts.Recipe, zk.ErrInvalidPath, cfg.Dir)
	}
	if opts.CloseTimeout <= 0 {
		return nil, fmt.Errorf("%w: close timeout %v: it must be positive", cfg.Errors.InvalidOption, opts.CloseTimeout)
	}
	if conn == nil {
		return nil, fmt.Errorf("%w: nil connection", cfg.Errors.Closed)
	}
	if conn.State() == zk.StateClosed {
		return nil, fmt.Errorf("%w: connection closed", cfg.Errors.Closed)
	}
	if opts.ID == "" {
		opts.ID = uuid.NewString()
	}
	cfg.SuspendedIsLost = opts.SuspendedIsLost
	cfg.SessionID = conn.SessionID()
	m, err := newMachine(cfg)
	if err != nil {
		return nil, err
	}
	in := &Instance{conn: conn, opts: opts, errs: cfg.Errors, closing: make(chan struct{}), turn: make(chan struct{}, 1)}
	in.tel = runtime.NewTelemetry(conn, runtime.TelemetryConfig{
		TracerProvider: opts.TracerProvider, MeterProvider: opts.MeterProvider,
		Scope: opts.Scope, Version: opts.Version, Recipe: opts.Recipe, Path: cfg.Dir, Instance: opts.ID,
	})
	in.shell = runtime.Run[Input, command](conn, m, runtime.Spec[Input, command]{
		Recipe: opts.Recipe, Path: cfg.Dir, Instance: opts.ID, Telemetry: in.tel,
		Exec: in.exec,
		Withdraw: func(call Input) bool {
			_, acquire := call.(Acquire) // a grant that raced the caller's giving up is handed back
			return acquire
		},
		ErrorType:      cfg.Errors.errorType,
		Closed:         cfg.Errors.Closed,
		CloseTimeout:   opts.CloseTimeout,
		CleanupPending: cfg.Errors.CleanupPending,
	})
	return in, nil
}

// Telemetry makes the instance's spans and measurements: the recipe's
// scope on the configured providers.
func (in *Instance) Telemetry() *runtime.Telemetry { return in.tel }

// StartSpan opens the span of one of the recipe's operations, op
// ("acquire", "campaign", "release", ...): "<recipe>.<op> <dir>", INTERNAL,
// with the recipe's attributes (runtime.Telemetry.Start).
func (in *Instance) StartSpan(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return in.tel.Start(ctx, op, trace.SpanKindInternal, attrs...)
}

// SpanGrant records a grant on its span: the node, its czxid and the
// session, and zkrecipes.acquired.
func (in *Instance) SpanGrant(span trace.Span, g Grant) {
	span.SetAttributes(append(runtime.GrantAttrs(g.Node, g.Token, in.conn.SessionID()), AttrAcquired.Bool(true))...)
}

// AttrAcquired says whether an acquire (a try's, mostly) got its grant.
const AttrAcquired = attribute.Key("zkrecipes.acquired")

// ID is the instance's id (Options.ID).
func (in *Instance) ID() string { return in.opts.ID }

// State is the machine's current state.
func (in *Instance) State() events.State { return in.shell.State() }

// Subscribe returns a subscription to this instance's lifecycle events.
func (in *Instance) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return in.shell.Subscribe(opts...)
}

// Do sends the input made by mk (given a fresh request id) and waits for its
// answer. When ctx ends first it returns ctx.Err(); for an Acquire it also
// cancels the request, and a grant that raced the cancel is handed back.
func (in *Instance) Do(ctx context.Context, mk func(req uint64) Input) (Result, error) {
	a, err := in.shell.Do(ctx, mk)
	r, _ := a.Value.(Reply)
	return Result{Reply: r, Loss: a.Loss, Revoke: a.Revoke}, err
}

// Close shuts the machine down: waiters fail, our node is deleted, and the
// actor stops. It waits at most CloseTimeout for the deletes; those still
// owed then (the connection is down) go to the connection's janitor
// (runtime.HandOver), which deletes them when the same session is back,
// and Close returns cfg.Errors.CleanupPending. Every later call returns
// the first one's result.
func (in *Instance) Close() error {
	in.closeOnce.Do(func() { close(in.closing) })
	return in.shell.Close()
}

// Acquire opens the span of an acquire (a try_acquire for a.Try), with
// attrs, and sends a as Do does. On a mutex Instance (Options.Mutex) it
// first waits for the handle's turn, as sync.Mutex (a try does not wait:
// not granted), and a grant keeps the turn until its Release. check, if
// not nil, runs then, before a is sent: its error is the call's. Errors:
// Do's, or the recipe's Closed once Close has begun.
func (in *Instance) Acquire(ctx context.Context, a Acquire, check func() error, attrs ...attribute.KeyValue) (r Result, err error) {
	op := "acquire"
	if a.Try {
		op = "try_acquire"
	}
	ctx, span := in.StartSpan(ctx, op, attrs...)
	defer span.End()
	defer func() {
		switch {
		case err != nil:
			in.SpanError(span, err)
		case r.Granted:
			in.SpanGrant(span, r.Grant)
		default:
			span.SetAttributes(AttrAcquired.Bool(false))
		}
	}()
	if in.opts.Mutex {
		if took, err := in.take(ctx, a.Try); !took {
			return Result{}, err
		}
		defer func() {
			if err == nil && r.Granted {
				in.mu.Lock()
				in.mine = r.Loss
				in.mu.Unlock()
			} else {
				<-in.turn
			}
		}()
	}
	if check != nil {
		if err := check(); err != nil {
			return Result{}, err
		}
	}
	return in.Do(ctx, func(req uint64) Input { a.Req = req; return a })
}

// take waits for the handle's turn; with try it does not wait (false,
// nil). A free turn is taken even when ctx has just ended, so that what
// follows it (a refused upgrade, a try's answer) does not depend on the
// scheduler. Errors: ctx.Err(), or the recipe's Closed once Close has
// begun.
func (in *Instance) take(ctx context.Context, try bool) (bool, error) {
	if in.Closed() {
		return false, in.errs.Closed
	}
	select {
	case in.turn <- struct{}{}:
		return true, nil
	default:
		if try {
			return false, nil
		}
	}
	select {
	case in.turn <- struct{}{}:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-in.closing:
		return false, in.errs.Closed
	}
}

// Release opens the span of a release, with attrs, and sends rel as Do
// does: one hold of the grant whose Loss is loss, or (nil) of the
// handle's. Elsewhere than on a mutex Instance, a grant that has ended is
// NotHeld, wrapping its cause. On a mutex Instance only the grant that has
// the turn releases (even when it has ended; any other is NotHeld), and
// once rel is sent the turn goes to the next Acquire; a rel not sent (ctx
// had ended) leaves the hold as it was.
func (in *Instance) Release(ctx context.Context, loss *runtime.Loss, rel Release, attrs ...attribute.KeyValue) (err error) {
	ctx, span := in.StartSpan(ctx, "release", attrs...)
	defer span.End()
	defer func() { in.SpanError(span, err) }()
	switch {
	case in.Closed():
		return in.errs.Closed
	case !in.opts.Mutex && loss != nil && loss.Err() != nil:
		return fmt.Errorf("%w: %w", in.errs.NotHeld, loss.Err())
	case !in.opts.Mutex:
		_, err := in.Do(ctx, func(req uint64) Input { rel.Req = req; return rel })
		return err
	}
	in.mu.Lock()
	mine := in.mine
	if mine == nil || (loss != nil && loss != mine) {
		in.mu.Unlock()
		return in.errs.NotHeld
	}
	in.mine = nil
	in.mu.Unlock()
	sent := false
	_, err = in.Do(ctx, func(req uint64) Input { // called only when the input is sent
		sent, rel.Req = true, req
		return rel
	})
	if !sent {
		in.mu.Lock()
		in.mine = mine
		in.mu.Unlock()
		return err
	}
	<-in.turn
	return err
}

// Closed reports whether Close was called.
func (in *Instance) Closed() bool {
	select {
	case <-in.closing:
		return true
	default:
		return false
	}
}

// errorType is the span attribute error.type for err: a short stable name,
// from the recipe's own errors first, then ZooKeeper's.
func (e Errors) errorType(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{e.SessionLost, "session_lost"},
		{e.Suspended, "suspended"},
		{e.NodeDeleted, "node_deleted"},
		{e.NotHeld, "not_held"},
		{e.Closed, "closed"},
		{e.CleanupPending, "cleanup_pending"},
		{e.Released, "released"},
		{e.InvalidOption, "invalid_option"},
	} {
		if c.err != nil && errors.Is(err, c.err) {
			return c.name
		}
	}
	return runtime.ZKErrorType(err)
}

// ErrorType names err for a span's error.type, knowing this instance's
// recipe errors.
func (in *Instance) ErrorType(err error) string { return in.errs.errorType(err) }

// SpanError marks span as failed with err, if err is not nil: the Error
// status and error.type, named knowing this instance's recipe errors.
func (in *Instance) SpanError(span trace.Span, err error) {
	if err != nil {
		runtime.Fail(span, err, in.errs.errorType(err))
	}
}
