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
package barrier

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
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
// safe for concurrent use and hold no state between calls.
type Barrier struct {
	conn zk.Conn
	rq   zk.Conn // conn, its requests traced
	path string
	id   string
	tel  *runtime.Telemetry
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
	if err := checkPath(conn, path); err != nil {
		return nil, err
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.id == "" {
		o.id = uuid.NewString()
	}
	tel := runtime.NewTelemetry(conn, runtime.TelemetryConfig{TracerProvider: o.tp, MeterProvider: o.mp,
		Scope: ScopeName, Version: Version, Recipe: "barrier", Path: path, Instance: o.id})
	return &Barrier{conn: conn, rq: runtime.TraceConn(conn, tel, errorType), path: path, id: o.id, tel: tel}, nil
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

// Path is the barrier's node.
func (b *Barrier) Path() string { return b.path }

// ID is the handle's WithID, or a UUID made for it.
func (b *Barrier) ID() string { return b.id }

// Set raises the barrier: it creates the node (and its missing parents, as
// containers). Setting a barrier that is set is not an error.
func (b *Barrier) Set(ctx context.Context) error {
	return b.span(ctx, "set", func(ctx context.Context) error {
		// no_node (parents to make first) and node_exists (set already)
		// are steps of Set, not failures.
		ctx = runtime.Expect(ctx, zk.ErrNoNode, zk.ErrNodeExists)
		return zk.EnsurePath(ctx, b.rq, b.path, zk.ModePersistent)
	})
}

// Remove lowers the barrier: it deletes the node, and every Wait returns.
// Removing a barrier that is not set is not an error.
func (b *Barrier) Remove(ctx context.Context) error {
	return b.span(ctx, "remove", func(ctx context.Context) error {
		err := b.rq.Delete(runtime.Expect(ctx, zk.ErrNoNode), b.path, zk.AnyVersion)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
}

// Wait returns nil once the barrier's node does not exist: at once when it
// is not set, else when it is removed (one data watch; the watch is set
// again only when it fires for something else or the connection drops). A
// Wait on a barrier not set leaves no watch behind.
func (b *Barrier) Wait(ctx context.Context) error {
	return b.span(ctx, "wait", func(ctx context.Context) error {
		for {
			// Not an exists: on a barrier not set it would leave a watch
			// waiting for the next Set, one per Wait.
			ok, w, err := runtime.WatchDeletion(runtime.Expect(ctx, zk.ErrNoNode), b.rq, b.path)
			switch {
			case errors.Is(err, zk.ErrConnectionLoss):
				if err := awaitConnected(ctx, b.conn); err != nil {
					return err
				}
				continue
			case err != nil:
				return err
			case !ok:
				return nil
			}
			select {
			case ev, open := <-w:
				if open && ev.Type == zk.EventNodeDeleted {
					return nil
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
}

func (b *Barrier) span(ctx context.Context, name string, f func(context.Context) error) error {
	ctx, span := b.tel.Start(ctx, name, trace.SpanKindInternal)
	defer span.End()
	err := f(ctx)
	runtime.Fail(span, err, errorType(err))
	return err
}

// awaitConnected waits until conn has a session again after a connection
// loss. ErrSessionLost when the session ended meanwhile, ErrClosed when
// the connection was closed.
func awaitConnected(ctx context.Context, conn zk.Conn) error {
	changed := make(chan struct{}, 1)
	cancel := conn.Subscribe(func(zk.SessionEvent) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer cancel()
	for {
		switch conn.State() {
		case zk.StateConnected, zk.StateReconnected:
			return nil
		case zk.StateLost:
			return ErrSessionLost
		case zk.StateClosed:
			return ErrClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
