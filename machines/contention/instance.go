package contention

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
}

// DefaultOptions are the defaults every recipe documents: SuspendedIsLost,
// a 10 s CloseTimeout, a random id and the global tracer and meter
// providers.
func DefaultOptions(recipe, scope, version string) Options {
	return Options{Recipe: recipe, Scope: scope, Version: version, SuspendedIsLost: true, CloseTimeout: 10 * time.Second}
}

// Instance runs a Machine on a connection in a runtime.Shell: the shell
// runs the actor, the calls, the spans and the events; the Instance adds
// what only the contention engine knows — how its commands are made on
// ZooKeeper (exec), and Close's shutdown and hand-over. Its methods are
// safe for concurrent use.
type Instance struct {
	conn  zk.Conn
	opts  Options
	errs  Errors
	tel   *runtime.Telemetry
	shell *runtime.Shell[Input, Command]

	closing   chan struct{} // closed when Close begins
	closeOnce sync.Once
	turn      chan struct{} // holds a token while a mutex handle's hold lasts (Take)
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
// conn, with opts' defaults filled in and cfg.SuspendedIsLost from opts.
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
	m, err := NewMachine(cfg)
	if err != nil {
		return nil, err
	}
	return start(conn, cfg.Dir, m, opts), nil
}

// start runs m on conn. The Instance owns m from now on.
func start(conn zk.Conn, dir string, m *Machine, opts Options) *Instance {
	in := &Instance{conn: conn, opts: opts, errs: m.cfg.Errors, closing: make(chan struct{}), turn: make(chan struct{}, 1)}
	in.tel = runtime.NewTelemetry(conn, runtime.TelemetryConfig{
		TracerProvider: opts.TracerProvider, MeterProvider: opts.MeterProvider,
		Scope: opts.Scope, Version: opts.Version, Recipe: opts.Recipe, Path: dir, Instance: opts.ID,
	})
	in.shell = runtime.Run[Input, Command](conn, shellMachine{m}, runtime.Spec[Input, Command]{
		Recipe: opts.Recipe, Path: dir, Instance: opts.ID, Telemetry: in.tel,
		Exec:    in.exec,
		Answers: answers,
		Session: func(ev zk.SessionEvent) Input { return sessionChange{State: ev.State, SessionID: ev.SessionID} },
		Withdraw: func(call Input, req uint64) (Input, bool) {
			_, acquire := call.(Acquire) // a grant that raced the caller's giving up is handed back
			return cancelReq{Req: req}, acquire
		},
		ErrorType:      m.cfg.Errors.errorType,
		Closed:         m.cfg.Errors.Closed,
		Shutdown:       func(req uint64) Input { return shutdown{Req: req} },
		HandOver:       func(req uint64) Input { return handover{Req: req} },
		CloseTimeout:   opts.CloseTimeout,
		CleanupPending: m.cfg.Errors.CleanupPending,
	})
	return in
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

// Take waits for the handle's one hold, for a handle that is a mutex
// across goroutines (as sync.Mutex): the caller holds it until it calls
// Give, after its hold's Release was sent. With try it does not wait
// (false, nil). Errors: ctx.Err(), or the recipe's Closed once Close has
// begun.
func (in *Instance) Take(ctx context.Context, try bool) (bool, error) {
	if in.Closed() {
		return false, in.errs.Closed
	}
	if try {
		select {
		case in.turn <- struct{}{}:
			return true, nil
		default:
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

// Give hands the hold Take gave to the next caller.
func (in *Instance) Give() { <-in.turn }

// Release sends a Release and waits for its answer, as Do does, and
// reports whether it was sent: a Release not sent (ctx had ended) leaves
// the hold as it was.
func (in *Instance) Release(ctx context.Context, rel Release) (sent bool, err error) {
	_, err = in.Do(ctx, func(req uint64) Input { // called only when the input is sent
		sent, rel.Req = true, req
		return rel
	})
	return sent, err
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

// shellMachine is the Machine as the runtime.Shell runs it: its output in
// the shell's terms.
type shellMachine struct{ *Machine }

func (m shellMachine) Start() runtime.Output[Command] { return m.shellOutput(m.Machine.Start()) }

func (m shellMachine) Step(in Input) runtime.Output[Command] {
	return m.shellOutput(m.Machine.Step(in))
}

func (m shellMachine) shellOutput(out Output) runtime.Output[Command] {
	so := runtime.Output[Command]{Commands: out.Commands, Done: out.Done}
	for _, e := range out.Events {
		so.Events = append(so.Events, events.Event{Type: e.Type, Phase: phases[e.Type], State: e.State,
			Term: e.Term, Node: e.Node, Token: e.Token, Err: e.Err})
	}
	for _, r := range out.Replies {
		sr := runtime.Reply{Req: r.Req, Value: r, Err: r.Err}
		if l := r.Leftovers; len(l.Nodes)+len(l.Prefixes) > 0 {
			sr.Value = l // a handover's answer, for Shell.Close
		}
		if r.Granted {
			sr.Grant = r.Grant.Term
		}
		so.Replies = append(so.Replies, sr)
	}
	for _, e := range out.TermEnded {
		so.Ended = append(so.Ended, runtime.TermEnd{Term: e.Term, Cause: e.Cause})
	}
	so.Revoked = out.Revoked
	return so
}

// forwardWatches waits for the two watches of a watchNode — the mark's and
// the node's deletion — and returns the watchFired input that settles it.
// A release mark's creation is the one, as soon as it comes (the
// deletion's event, from the same transaction, would only come later). A
// hold mark's creation (hold) is posted at once too, and the deletion
// after it. Otherwise the deletion is the one. The adapter fills watch
// channels in the server's order, so when the deletion is there, a mark
// made before it is there too.
func forwardWatches(ctx context.Context, sh *runtime.Shell[Input, Command], cmd uint64, markW, deleteW <-chan zk.WatchEvent, hold bool) (Input, bool) {
	fired := func(ev zk.WatchEvent) Input { return watchFired{Cmd: cmd, Event: ev} }
	// decisive reports whether a mark's event settles the watch: a
	// release mark's creation does; a hold mark's creation is posted on
	// its own and the deletion is still waited for.
	decisive := func(ev zk.WatchEvent) bool {
		if ev.Type != zk.EventNodeCreated {
			return false
		}
		if !hold {
			return true
		}
		sh.Post(fired(ev), true)
		return false
	}
	select {
	case ev := <-markW:
		if decisive(ev) {
			return fired(ev), true
		}
	case ev := <-deleteW:
		select {
		case m := <-markW:
			if decisive(m) {
				return fired(m), true
			}
		default:
		}
		return fired(ev), true
	case <-ctx.Done():
		return nil, false
	}
	select {
	case ev := <-deleteW:
		return fired(ev), true
	case <-ctx.Done():
		return nil, false
	}
}

// forwardEach posts one watchFired per watch in ws, as each fires, the
// last as the goroutine's answer; it stops early when ctx ends.
func forwardEach(ctx context.Context, sh *runtime.Shell[Input, Command], cmd uint64, ws []<-chan zk.WatchEvent) (Input, bool) {
	fired := make(chan zk.WatchEvent, len(ws))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, w := range ws {
		wg.Go(func() {
			select {
			case ev := <-w:
				fired <- ev
			case <-ctx.Done():
			}
		})
	}
	for i := range ws {
		select {
		case ev := <-fired:
			if i == len(ws)-1 {
				return watchFired{Cmd: cmd, Event: ev}, true
			}
			sh.Post(watchFired{Cmd: cmd, Event: ev}, true)
		case <-ctx.Done():
			return nil, false
		}
	}
	return nil, false
}

// answers is the command an input answers (0: none).
func answers(i Input) uint64 {
	switch i := i.(type) {
	case created:
		return i.Cmd
	case dirEnsured:
		return i.Cmd
	case dirRead:
		return i.Cmd
	case dirListed:
		return i.Cmd
	case watching:
		return i.Cmd
	case nodesChecked:
		return i.Cmd
	case watchFired:
		return i.Cmd
	case ownNodeGone:
		return i.Cmd
	case deleted:
		return i.Cmd
	case announced:
		return i.Cmd
	case promoted:
		return i.Cmd
	case markFired:
		return i.Cmd
	case dataRead:
		return i.Cmd
	case dataChanged:
		return i.Cmd
	}
	return 0
}

// exec makes cmd's requests off the actor (runtime.Spec.Exec), each in a
// CLIENT span made by op, and posts their replies back as inputs.
func (in *Instance) exec(sh *runtime.Shell[Input, Command], cmd Command, op runtime.Op) {
	conn := in.conn
	switch c := cmd.(type) {
	case createNode:
		sh.Go(func(ctx context.Context) (Input, bool) {
			var path string
			var err error
			// no_node: the directory is not made yet (the machine makes
			// it and creates again), an expected step of a first acquire.
			op(runtime.Expect(ctx, zk.ErrNoNode), "create", func(ctx context.Context) error {
				if c.Beside == "" {
					path, err = conn.Create(ctx, c.Prefix, c.Data, zk.ModeEphemeralSequential)
					runtime.SetNode(ctx, path)
					return err
				}
				path = c.Prefix + c.Seq
				runtime.SetNode(ctx, path)
				_, err = conn.Multi(ctx,
					&zk.CheckOp{Path: c.Beside, Version: zk.AnyVersion},
					&zk.CreateOp{Path: path, Data: c.Data, Mode: zk.ModeEphemeral})
				return err
			})
			return created{Cmd: c.Cmd, Path: path, Err: err}, true
		})
	case ensureDir:
		sh.Go(func(ctx context.Context) (Input, bool) {
			var err error
			op(ctx, "create", func(ctx context.Context) error {
				err = zk.EnsurePath(ctx, conn, c.Dir, zk.ModeContainer)
				return err
			})
			return dirEnsured{Cmd: c.Cmd, Err: err}, true
		})
	case readDir:
		sh.Go(func(ctx context.Context) (Input, bool) {
			r := dirRead{Cmd: c.Cmd}
			var ownW <-chan zk.WatchEvent
			var ownErr, childErr error
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				op(runtime.Expect(ctx, zk.ErrNoNode), "children", func(ctx context.Context) error {
					runtime.SetNode(ctx, c.Own)
					_, r.Own, ownW, ownErr = conn.ChildrenW(ctx, c.Own)
					return ownErr
				})
			}()
			op(ctx, "children", func(ctx context.Context) error {
				r.Children, _, childErr = conn.Children(ctx, c.Dir)
				return childErr
			})
			wg.Wait()
			r.OwnExists = ownErr == nil
			if errors.Is(ownErr, zk.ErrNoNode) {
				ownErr = nil
			}
			// Both errors count: a read of our node that failed (a lost
			// reply) says nothing about the node, and must be retried
			// like a failed listing, never taken for its absence.
			r.Err = errors.Join(childErr, ownErr)
			if ownW == nil {
				return r, true
			}
			sh.Post(r, false)
			select {
			case ev := <-ownW:
				return ownNodeGone{Cmd: c.Cmd, Event: ev, ConnClosed: conn.State() == zk.StateClosed}, true
			case <-ctx.Done():
				return nil, false
			}
		})
	case listDir:
		sh.Go(func(ctx context.Context) (Input, bool) {
			r := dirListed{Cmd: c.Cmd}
			if !c.Relist {
				// The hunt for a create whose reply was lost: that create
				// may be committed and not yet applied on the server we
				// now talk to (another one, after a reconnect). Listed
				// without the sync, it could be missed, made again, and
				// the first one left below ours as a ghost we wait on.
				op(ctx, "sync", func(ctx context.Context) error {
					r.Err = conn.Sync(ctx, c.Dir)
					return r.Err
				})
				if r.Err != nil {
					return r, true
				}
			}
			op(ctx, "children", func(ctx context.Context) error {
				r.Children, _, r.Err = conn.Children(ctx, c.Dir)
				return r.Err
			})
			return r, true
		})
	case watchNode:
		if c.Promotion {
			sh.Go(func(ctx context.Context) (Input, bool) {
				var st zk.Stat
				var w <-chan zk.WatchEvent
				var err error
				op(runtime.Expect(ctx, zk.ErrNoNode), "get", func(ctx context.Context) error {
					runtime.SetNode(ctx, c.Path)
					_, st, w, err = conn.GetW(ctx, c.Path)
					return err
				})
				r := watching{Cmd: c.Cmd, Exists: err == nil, Held: err == nil && st.Version > 0}
				if err != nil && !errors.Is(err, zk.ErrNoNode) {
					r.Err = err
				}
				if w == nil {
					return r, true
				}
				sh.Post(r, true)
				select {
				case ev := <-w:
					return watchFired{Cmd: c.Cmd, Event: ev}, true
				case <-ctx.Done():
					return nil, false
				}
			})
			return
		}
		sh.Go(func(ctx context.Context) (Input, bool) {
			var markW, deleteW <-chan zk.WatchEvent
			var markErr, childErr error
			var held bool
			var wg sync.WaitGroup
			if !c.Plain {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mark := ReleaseMark(c.Path)
					if c.Hold {
						mark = HoldMark(c.Path)
					}
					op(ctx, "exists", func(ctx context.Context) error {
						runtime.SetNode(ctx, mark)
						_, held, markW, markErr = conn.ExistsW(ctx, mark)
						return markErr
					})
				}()
			}
			// no_node: the node we wait for is gone already.
			op(runtime.Expect(ctx, zk.ErrNoNode), "children", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				_, _, deleteW, childErr = conn.ChildrenW(ctx, c.Path)
				return childErr
			})
			wg.Wait()
			r := watching{Cmd: c.Cmd, Exists: childErr == nil, Held: c.Hold && held, Err: markErr}
			if childErr != nil && !errors.Is(childErr, zk.ErrNoNode) {
				r.Err = errors.Join(childErr, markErr) // a lost reply to either is retried
			}
			if deleteW == nil {
				return r, true
			}
			sh.Post(r, true)
			return forwardWatches(ctx, in.shell, c.Cmd, markW, deleteW, c.Hold)
		})
	case fireMark:
		sh.Go(func(ctx context.Context) (Input, bool) {
			var err error
			op(ctx, "multi", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				_, err = conn.Multi(ctx,
					&zk.CreateOp{Path: c.Path, Mode: zk.ModeEphemeral},
					&zk.DeleteOp{Path: c.Path, Version: zk.AnyVersion})
				return err
			})
			return markFired{Cmd: c.Cmd, Err: err}, true
		})
	case promote:
		sh.Go(func(ctx context.Context) (Input, bool) {
			var err error
			op(ctx, "set", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Node)
				_, err = conn.Set(ctx, c.Node, c.Data, 0)
				return err
			})
			return promoted{Cmd: c.Cmd, Err: err}, true
		})
	case checkNodes:
		sh.Go(func(ctx context.Context) (Input, bool) {
			r := nodesChecked{Cmd: c.Cmd, Exists: make([]bool, len(c.Paths))}
			errs := make([]error, len(c.Paths))
			watches := make([]<-chan zk.WatchEvent, len(c.Paths))
			var wg sync.WaitGroup
			for i, p := range c.Paths {
				wg.Add(1)
				go func() {
					defer wg.Done()
					op(runtime.Expect(ctx, zk.ErrNoNode), "children", func(ctx context.Context) error {
						runtime.SetNode(ctx, p)
						_, _, watches[i], errs[i] = conn.ChildrenW(ctx, p)
						return errs[i]
					})
					r.Exists[i] = errs[i] == nil
					if errors.Is(errs[i], zk.ErrNoNode) {
						errs[i] = nil
					}
				}()
			}
			wg.Wait()
			r.Err = errors.Join(errs...)
			var live []<-chan zk.WatchEvent
			for i, w := range watches {
				if r.Exists[i] && w != nil {
					live = append(live, w)
				}
			}
			if r.Err != nil || len(live) == 0 {
				return r, true // a failed check is sent again, with new watches
			}
			sh.Post(r, true)
			return forwardEach(ctx, sh, c.Cmd, live)
		})
	case announceMark:
		sh.Go(func(ctx context.Context) (Input, bool) {
			var err error
			// no_node: our node went meanwhile (released, resigned).
			op(runtime.Expect(ctx, zk.ErrNoNode), "multi", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				err = announce(ctx, conn, c.Node, c.Path)
				return err
			})
			return announced{Cmd: c.Cmd, Err: err}, true
		})
	case readData:
		execReadData(sh, conn, c, op)
	case deleteNode:
		sh.Go(func(ctx context.Context) (Input, bool) {
			var err error
			if c.Release || len(c.Fire) > 0 {
				marks := c.Fire
				if c.Release {
					marks = append(slices.Clone(c.Fire), ReleaseMark(c.Path))
				}
				var ops []zk.Op
				for _, mark := range marks {
					ops = append(ops, &zk.CreateOp{Path: mark, Mode: zk.ModePersistent}, &zk.DeleteOp{Path: mark, Version: zk.AnyVersion})
				}
				ops = append(ops, &zk.DeleteOp{Path: c.Path, Version: zk.AnyVersion})
				op(ctx, "multi", func(ctx context.Context) error {
					runtime.SetNode(ctx, c.Path)
					_, err = conn.Multi(ctx, ops...)
					return err
				})
			} else {
				// no_node: gone already (the session's end, or a delete
				// whose reply was lost): what was wanted.
				op(runtime.Expect(ctx, zk.ErrNoNode), "delete", func(ctx context.Context) error {
					runtime.SetNode(ctx, c.Path)
					err = conn.Delete(ctx, c.Path, zk.AnyVersion)
					return err
				})
			}
			return deleted{Cmd: c.Cmd, Err: err}, true
		})
	}
}

// announce makes the hold mark path for node, if node exists, making its
// directory first if it is missing (once: a container the server removed
// just then leaves us without the mark, which only costs the waiter behind
// a read).
func announce(ctx context.Context, conn zk.Conn, node, path string) error {
	mark := func() ([]zk.OpResult, error) {
		return conn.Multi(ctx,
			&zk.CheckOp{Path: node, Version: zk.AnyVersion},
			&zk.CreateOp{Path: path, Mode: zk.ModeEphemeral})
	}
	res, err := mark()
	if errors.Is(err, zk.ErrNoNode) && len(res) == 2 && errors.Is(res[1].Err, zk.ErrNoNode) {
		if err := zk.EnsurePath(ctx, conn, zk.Parent(path), zk.ModeContainer); err != nil {
			return err
		}
		_, err = mark()
	}
	return err
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
func (in *Instance) SpanError(span trace.Span, err error) { in.errs.spanError(span, err) }

func (e Errors) spanError(span trace.Span, err error) {
	if err != nil {
		runtime.Fail(span, err, e.errorType(err))
	}
}
