// Package barrier is ZooKeeper's barrier and double barrier recipes.
//
// A Barrier is one node: Set creates it, Remove deletes it, and Wait
// returns once it does not exist (one watch, no polling), the layout of
// Curator's DistributedBarrier.
//
// A DoubleBarrier makes a fixed number of members enter together and leave
// together, in the layout of Curator's DistributedDoubleBarrier: each
// member is an ephemeral node named by a UUID under the barrier's path, and
// the member whose arrival completes the count creates <path>/ready, which
// the others watch. Enter is a synchronized start: it returns once every
// member has arrived. Leave uses the exit protocol of ZooKeeper's recipe:
// the member with the lowest name waits on the highest, every other member
// deletes its node and waits on the lowest, so no one is woken by every
// departure.
//
// A server may be behind the leader, and a watch event (before ZooKeeper
// 3.9) does not keep a session from moving to such a server (see
// docs/zk-semantics.md, §8). So a member's ready is one made with or after
// its own node: a ready made before it did not count it (a round in
// progress that its first look, read from a server behind, did not show),
// and the member withdraws its node and waits that round out. And Leave's
// first listing must show ready, which it does once its server has every
// member of the round we entered; when it does not, the member syncs and
// lists again.
//
// # Failover
//
// A member whose process dies, or is cut off from the ensemble, counts as
// gone only once the server expires its session: after the session
// timeout, and up to one server tick (tickTime, 2 s by default) more. Its
// member node is ephemeral, so only the session's expiry deletes it, and
// the server looks for expired sessions once per tick. Until then it
// counts: an Enter may be let through with it in the count, and Leave waits
// for its node to go. A member that closes, or whose call is cancelled,
// deletes its node at once. A Barrier's node is persistent: it stays set
// when the process that set it dies, until another one removes it.
package barrier

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ScopeName is the instrumentation scope of the barriers' spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/barrier"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// Errors of the barriers. Match them with errors.Is.
var (
	// ErrInvalidOption: an option's or argument's value is out of range
	// (members below 1, a nil option value). Nothing was sent.
	ErrInvalidOption = fmt.Errorf("barrier: %w", zkrecipes.ErrInvalidOption)
	// ErrMembersMismatch: the double barrier's path records another
	// member count than ours (another participant was made with another
	// count). Nothing was created.
	ErrMembersMismatch = errors.New("barrier: member count differs")
	// ErrNotEntered: Leave without a completed Enter.
	ErrNotEntered = errors.New("barrier: not entered")
	// ErrAlreadyEntered: Enter while entered, entering or leaving.
	ErrAlreadyEntered = errors.New("barrier: already entered")
	// ErrSessionLost: the session ended while we were a member: our node
	// is gone and we are counted out. Enter again to take part again.
	ErrSessionLost = fmt.Errorf("barrier: %w", zkrecipes.ErrSessionLost)
	// ErrClosed: the handle or its connection is closed.
	ErrClosed = fmt.Errorf("barrier: %w", zkrecipes.ErrClosed)
)

// Barrier is a barrier node: while it exists, Wait blocks. Its methods are
// safe for concurrent use; its calls are independent of each other. Its
// State is START while it is open, STOP once it or its connection is
// closed; its events are START, the session's SUSPENDED, RECONNECTED and
// LOST, STOP_START and STOP_COMPLETE.
type Barrier struct{ handle }

// handle is what a Barrier and a DoubleBarrier have alike: a machine run
// by a runtime.Shell.
type handle struct {
	conn    zk.Conn
	path    string
	id      string
	members int // a DoubleBarrier's count (0: a Barrier)
	tel     *runtime.Telemetry
	shell   *runtime.Shell[input, command]
}

// BarrierOption is Option.
//
// Deprecated: use Option.
type BarrierOption = Option

// WithBarrierTracerProvider is WithTracerProvider.
//
// Deprecated: use WithTracerProvider.
func WithBarrierTracerProvider(tp trace.TracerProvider) Option { return WithTracerProvider(tp) }

// WithBarrierMeterProvider is WithMeterProvider.
//
// Deprecated: use WithMeterProvider.
func WithBarrierMeterProvider(mp metric.MeterProvider) Option { return WithMeterProvider(mp) }

// New returns a Barrier on path. Nothing is sent. Errors: zk.ErrInvalidPath,
// ErrInvalidOption, ErrClosed (a nil or closed connection).
func New(conn zk.Conn, path string, opts ...Option) (*Barrier, error) {
	conn, o, err := newOptions(conn, path, uuid.NewString(), opts)
	if err != nil {
		return nil, err
	}
	b := &Barrier{}
	b.run(conn, path, o, newBarrierMachine())
	return b, nil
}

// run starts m in h's Shell. (Only a member's Enter is answered with what
// must be given back when refused, and only a member has nodes to hand
// over.)
func (h *handle) run(conn zk.Conn, path string, o options, m runtime.Machine[input, command]) {
	h.conn, h.path, h.id = conn, path, o.id
	h.tel = runtime.NewTelemetry(conn, runtime.TelemetryConfig{TracerProvider: o.tp, MeterProvider: o.mp,
		Scope: ScopeName, Version: Version, Recipe: "barrier", Path: path, Instance: o.id})
	h.shell = runtime.Run(conn, m, runtime.Spec[input, command]{
		Recipe: "barrier", Path: path, Instance: o.id, Telemetry: h.tel, Exec: h.exec,
		Withdraw: func(input) bool { return true },
		Refused: func(c input, r runtime.Reply) (input, bool) {
			return enterRefused{}, c.(call).Op == opEnter && r.Err == nil
		},
		ErrorType: errorType, Closed: ErrClosed, CloseTimeout: o.closeTimeout, CleanupPending: ErrCleanupPending,
	})
}

func checkPath(conn zk.Conn, path string) error {
	if err := zk.ValidatePath(path); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	switch {
	case path == "/":
		return fmt.Errorf("barrier: %w %q: the root cannot be a barrier", zk.ErrInvalidPath, path)
	case conn == nil:
		return fmt.Errorf("%w: nil connection", ErrClosed)
	case conn.State() == zk.StateClosed:
		return fmt.Errorf("%w: connection closed", ErrClosed)
	}
	return nil
}

// Path is the barrier's node, or the double barrier's path.
func (h *handle) Path() string { return h.path }

// ID is the handle's WithID, or a UUID made for it (a DoubleBarrier's is
// its member node's).
func (h *handle) ID() string { return h.id }

// State is the handle's machine's state (see its type).
func (h *handle) State() events.State { return h.shell.State() }

// Subscribe returns a subscription to the handle's lifecycle events (see
// its type).
func (h *handle) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return h.shell.Subscribe(opts...)
}

// Set raises the barrier: it creates the node (and its missing parents, as
// containers). Setting a barrier that is set is not an error.
func (b *Barrier) Set(ctx context.Context) error { return b.call(ctx, opSet) }

// Remove lowers the barrier: it deletes the node, and every Wait returns.
// Removing a barrier that is not set is not an error.
func (b *Barrier) Remove(ctx context.Context) error { return b.call(ctx, opRemove) }

// Wait returns nil once the barrier's node does not exist: at once when it
// is not set, else when it is removed (one data watch; the watch is set
// again only when it fires for something else or ends with the
// connection, through a session's end too). A Wait on a barrier not set
// leaves no watch behind.
func (b *Barrier) Wait(ctx context.Context) error { return b.call(ctx, opWait) }

func (b *Barrier) call(ctx context.Context, op op) error {
	_, err := b.do(ctx, op)
	return err
}

// do runs call op of the handle's machine in an INTERNAL span named op.
func (h *handle) do(ctx context.Context, op op, attrs ...attribute.KeyValue) (runtime.Answer, error) {
	ctx, span := h.tel.Start(ctx, string(op), trace.SpanKindInternal, attrs...)
	defer span.End()
	a, err := h.shell.Do(ctx, func(req uint64) input { return call{Op: op, Req: req} })
	runtime.Fail(span, err, errorType(err))
	return a, err
}

// Close stops the handle: a waiting call returns ErrClosed, as every later
// call does; a DoubleBarrier leaves first (its member node is deleted,
// waiting at most WithCloseTimeout). A handle whose connection is closed
// stops by itself.
func (h *handle) Close() error { return h.shell.Close() }
