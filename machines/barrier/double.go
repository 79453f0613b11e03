package barrier

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ErrCleanupPending: Close could not delete our member node in time (the
// connection is down); the connection deletes it once the same session is
// back, and the server once the session ends.
var ErrCleanupPending = fmt.Errorf("barrier: %w", zkrecipes.ErrCleanupPending)

// DoubleBarrier is one member of a double barrier. Its methods are safe
// for concurrent use; one Enter or Leave runs at a time. Its State is
// START outside, OFFER while joining, DETERMINE while waiting for the
// others, READY inside, FAILED after its session ended while it was a
// member, STOP once closed; its events are ENTERED, LEFT, the session's
// SUSPENDED, RECONNECTED and LOST, and START, STOP_START, STOP_COMPLETE.
type DoubleBarrier struct {
	handle
	node atomic.Value // string: our member node's name, once entered
}

// Option configures a Barrier or a DoubleBarrier. A nil Option is ignored.
type Option func(*options)

type options struct {
	id           string
	tp           trace.TracerProvider
	mp           metric.MeterProvider
	closeTimeout time.Duration
	acl          []zk.ACL
}

// AttrMembers is the double barrier's member count on its spans.
const AttrMembers = attribute.Key("zkrecipes.barrier.members")

// WithID names the handle on its events and spans, and is its ID (default:
// a UUID; a DoubleBarrier's is its member node's).
func WithID(id string) Option { return func(o *options) { o.id = id } }

// WithTracerProvider sets where the handle's spans go (default: the
// global provider).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// WithMeterProvider sets where the handle's measurements go (its
// requests' db.client.operation.duration; default: the global provider).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.mp = mp } }

// WithCloseTimeout bounds how long Close waits for the handle to stop: a
// member, to delete its node (default 10s).
func WithCloseTimeout(d time.Duration) Option { return func(o *options) { o.closeTimeout = d } }

// WithACL sets the ACL of every node the handle creates (the barrier node,
// or the double barrier's path, member nodes and ready node; and their
// missing parents), in place of the connection's (zk.WithACL, or its
// default). Default: the connection's. An entry without a scheme or
// permissions is refused (ErrInvalidOption).
func WithACL(acl ...zk.ACL) Option { return func(o *options) { o.acl = acl } }

// newOptions checks conn and path, applies opts to the defaults (id: the
// handle's ID without WithID), checks them, and returns conn creating with
// WithACL's ACL.
func newOptions(conn zk.Conn, path, id string, opts []Option) (zk.Conn, options, error) {
	if err := checkPath(conn, path); err != nil {
		return nil, options{}, err
	}
	o := options{id: id, closeTimeout: 10 * time.Second, tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider()}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.closeTimeout <= 0:
		return nil, o, fmt.Errorf("%w: close timeout %v: it must be positive", ErrInvalidOption, o.closeTimeout)
	case o.tp == nil:
		return nil, o, fmt.Errorf("%w: nil tracer provider", ErrInvalidOption)
	case o.mp == nil:
		return nil, o, fmt.Errorf("%w: nil meter provider", ErrInvalidOption)
	}
	conn, err := zk.UseACL(conn, o.acl...)
	if err != nil {
		return nil, o, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return conn, o, nil
}

// NewDouble returns a member of the double barrier at path that lets
// members through together. Nothing is sent until Enter. Errors:
// zk.ErrInvalidPath, ErrInvalidOption (members below 1), ErrClosed.
func NewDouble(conn zk.Conn, path string, members int, opts ...Option) (*DoubleBarrier, error) {
	name := uuid.NewString()
	conn, o, err := newOptions(conn, path, name, opts)
	switch {
	case err != nil:
		return nil, err
	case members < 1:
		return nil, fmt.Errorf("%w: members %d: it must be at least 1", ErrInvalidOption, members)
	}
	d := &DoubleBarrier{handle: handle{members: members}}
	d.run(conn, path, o, newMachine(config{Path: path, Members: members, Name: name, SessionID: conn.SessionID()}))
	return d, nil
}

// Node is our member node of the last Enter that passed ("" before one):
// <path>/<uuid>-<round>. It exists until Leave.
func (d *DoubleBarrier) Node() string {
	if n, _ := d.node.Load().(string); n != "" {
		return zk.Join(d.path, n)
	}
	return ""
}

// Members is how many members enter and leave together.
func (d *DoubleBarrier) Members() int { return d.members }

// Enter joins the barrier and returns once all members have joined: a
// synchronized start. More than the count may enter; the count is a
// threshold. A member that arrives while a round is in progress (ready is
// there and members who entered before it, or with it, are still in: it
// comes late, or was counted out of that round when its session ended)
// joins the next round: it makes no node and counts no one until that
// round is over. When
// ctx ends first, our member node is deleted and ctx's error returned: we
// are not counted (not even when ctx ends as we are let in: either Enter
// returns nil, or we get out as the others pass). ErrAlreadyEntered while entered;
// ErrMembersMismatch when the path records another count (nothing is
// created); ErrSessionLost when the session ended while we waited.
func (d *DoubleBarrier) Enter(ctx context.Context) error {
	a, err := d.do(ctx, opEnter, AttrMembers.Int(d.members))
	if err == nil {
		d.node.Store(a.Value)
	}
	return err
}

// Leave leaves the barrier and returns once every member has left. When
// ctx ends first, our member node is deleted and ctx's error returned.
// ErrNotEntered without a completed Enter; ErrSessionLost when the session
// ended while we were a member (we were counted out then).
func (d *DoubleBarrier) Leave(ctx context.Context) error {
	_, err := d.do(ctx, opLeave, AttrMembers.Int(d.members))
	return err
}

func errorType(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{ErrMembersMismatch, "members_mismatch"}, {ErrNotEntered, "not_entered"}, {ErrAlreadyEntered, "already_entered"},
		{ErrSessionLost, "session_lost"}, {ErrClosed, "closed"}, {ErrCleanupPending, "cleanup_pending"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return runtime.ZKErrorType(err)
}
