package twophase

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Participant takes part, under its id, in the transactions proposed
// under a root path. Serve runs it; its methods are safe for concurrent
// use. It is an actor: a pure machine run by a runtime.Shell, whose
// requests and handler calls are made off the actor.
type Participant struct {
	conn  zk.Conn
	p     paths
	id    string
	h     Handler
	tel   *runtime.Telemetry
	shell *runtime.Shell[input, command]

	mu      sync.Mutex
	closed  bool
	serving bool
	hctx    context.Context       // the handler calls' ctx: Serve's
	spans   map[string]trace.Span // per transaction
	served  sync.WaitGroup
}

// NewParticipant returns the participant id of the transactions under root,
// whose votes and decisions go to h. Nothing is sent to the server until
// Serve. Errors: zk.ErrInvalidPath for a bad root, ErrInvalidID for a bad
// id, ErrNilHandler, ErrClosed for a nil connection, ErrInvalidOption for
// a coordinator's option (WithVoteTimeout, WithRetention) or a WithID
// that is not id.
func NewParticipant(conn zk.Conn, root, id string, h Handler, opts ...Option) (*Participant, error) {
	if err := validRoot(root); err != nil {
		return nil, err
	}
	if err := validID("participant", id); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, ErrNilHandler
	}
	if conn == nil {
		return nil, ErrClosed
	}
	m, err := newMachine(config{Root: root, ID: id, SessionID: conn.SessionID()})
	if err != nil {
		return nil, err
	}
	conn, o, err := newOptions(conn, opts)
	switch {
	case err != nil:
		return nil, err
	case len(o.coordinator) > 0:
		return nil, fmt.Errorf("%w: %s is a coordinator's option", ErrInvalidOption, o.coordinator[0])
	case o.idSet && o.id != id:
		return nil, fmt.Errorf("%w: WithID(%q) beside the participant id %q", ErrInvalidOption, o.id, id)
	}
	sp := spec(conn, root, id, o)
	p := &Participant{conn: conn, p: paths{root}, id: id, h: h, spans: make(map[string]trace.Span), tel: sp.Telemetry}
	sp.Exec = p.exec
	sp.Withdraw = func(call input) bool {
		_, serve := call.(serveCall) // a withdrawn Serve ends serving
		return serve
	}
	p.shell = runtime.Run(conn, m, sp)
	return p, nil
}

// Path is the root path of the participant's transactions.
func (p *Participant) Path() string { return p.p.root }

// ID is the participant's id.
func (p *Participant) ID() string { return p.id }

// State is the participant's state: START while not serving, DETERMINE
// while serving with transactions pending, READY while serving and idle,
// FAILED after its session ended until it is registered again, STOP once
// closed.
func (p *Participant) State() events.State { return p.shell.State() }

// Subscribe returns a subscription to the participant's events: START,
// PREPARED (its handler voted), VOTED (the vote is written; a no vote
// carries its reason in Err), COMMITTED, ABORTED (the reason in Err) once
// its handler returned.
func (p *Participant) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return p.shell.Subscribe(opts...)
}

// Close stops Serve and waits for it to return, its handler call in
// flight and the deletion of its registration node (at most
// WithCloseTimeout: then ErrCleanupPending, and the connection deletes
// the node once the same session is back). Later calls return the first
// one's result; Serve returns ErrClosed.
func (p *Participant) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.shell.Close() // a Serve in progress returns: its handler call's ctx ends
	p.served.Wait()
	return err
}

// Serve registers the participant and handles its transactions until ctx
// ends (it returns ctx.Err()) or Close (ErrClosed): it votes on new ones
// with the Handler's Prepare, and calls Commit or Abort on each decided one,
// including those it missed while it was not serving. Errors of the server
// are retried, but a write it refuses for the connection's identity
// (zk.ErrNoAuth), which would be refused again, ends Serve with that error;
// one Serve at a time (ErrServing).
func (p *Participant) Serve(ctx context.Context) error {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return ErrClosed
	case p.serving:
		p.mu.Unlock()
		return ErrServing
	}
	p.serving = true
	p.served.Add(1)
	hctx, cancel := context.WithCancel(ctx)
	p.hctx = hctx
	p.mu.Unlock()
	defer func() {
		cancel() // a handler call in flight ends with Serve
		p.mu.Lock()
		p.serving = false
		p.mu.Unlock()
		p.served.Done()
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	// Serving goes on until ctx ends (the call is withdrawn: serving
	// stops) or Close (ErrClosed).
	_, err := p.shell.Do(ctx, func(req uint64) input { return serveCall{Req: req} })
	if !errors.Is(err, ErrClosed) && !p.isClosed() {
		cancel()
		_, _ = p.shell.Do(context.Background(), func(req uint64) input { return awaitStopped{Req: req} })
	}
	switch {
	case errors.Is(err, ErrClosed) || p.isClosed():
		return ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return err // the server refused a write (zk.ErrNoAuth)
}

func (p *Participant) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// spec is the Shell's spec of the handle id on root, but for its Exec.
func spec(conn zk.Conn, root, id string, o options) runtime.Spec[input, command] {
	return runtime.Spec[input, command]{Recipe: "twophase", Path: root, Instance: id,
		Telemetry: runtime.NewTelemetry(conn, runtime.TelemetryConfig{TracerProvider: o.tracerProvider, MeterProvider: o.meterProvider,
			Scope: ScopeName, Version: Version, Recipe: "twophase", Path: root, Instance: id}),
		ErrorType:      errorType,
		Closed:         ErrClosed,
		CloseTimeout:   o.closeTimeout,
		CleanupPending: ErrCleanupPending,
	}
}

func errorType(err error) string {
	switch {
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrCleanupPending):
		return "cleanup_pending"
	}
	return runtime.ZKErrorType(err)
}

// WaitRegistered waits until every participant of ids is registered under
// root (it is serving, so a Propose naming it is not refused with
// ErrUnknownParticipant), or ctx ends (ctx.Err()).
func WaitRegistered(ctx context.Context, conn zk.Conn, root string, ids ...string) error {
	if err := validRoot(root); err != nil {
		return err
	}
	if conn == nil {
		return ErrClosed
	}
	p := paths{root}
	for _, id := range ids {
		if err := validID("participant", id); err != nil {
			return err
		}
		var b backoff
		for {
			_, ok, w, err := conn.ExistsW(ctx, p.participant(id))
			if ok {
				break
			}
			if err != nil {
				if !retryable(err) {
					return fmt.Errorf("twophase: %w", err)
				}
				if err := wait(ctx, b.next()); err != nil {
					return err
				}
				continue
			}
			select {
			case <-w:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}
