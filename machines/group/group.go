package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ScopeName is the instrumentation scope of the group's spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/group"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// Errors of group membership. Match them with errors.Is.
var (
	// ErrMemberExists: another live session holds our id's node (or it is
	// a persistent node): Join fails, and a member whose node must be made
	// again finds it so and FAILs. Nothing of the other's is touched.
	ErrMemberExists = errors.New("group: member id held by another session")
	// ErrInvalidOption: an option's or argument's value is out of range
	// (an id that is not one node name, a nil provider), or the function
	// it was given to cannot use it. Nothing was sent.
	ErrInvalidOption = fmt.Errorf("group: %w", zkrecipes.ErrInvalidOption)
	// ErrSessionLost: the session our node was made on ended (on LOST
	// events: the node is made again on the new session).
	ErrSessionLost = fmt.Errorf("group: %w", zkrecipes.ErrSessionLost)
	// ErrCleanupPending: Close could not delete our node in time (the
	// connection is down); the connection deletes it once the same
	// session is back, and the server once the session ends.
	ErrCleanupPending = fmt.Errorf("group: %w", zkrecipes.ErrCleanupPending)
	// ErrClosed: the handle or its connection is closed.
	ErrClosed = fmt.Errorf("group: %w", zkrecipes.ErrClosed)
)

// Option configures a Member (Join) or a Group (Watch). A nil Option is
// ignored.
type Option func(*options)

type options struct {
	id           string
	idSet        bool
	tp           trace.TracerProvider
	mp           metric.MeterProvider
	closeTimeout time.Duration
	acl          []zk.ACL
	aclSet       bool
}

// WithID names a Group on its events and spans, and is its ID (default: a
// UUID). A Member's ID is Join's id argument: Join refuses WithID
// (ErrInvalidOption).
func WithID(id string) Option { return func(o *options) { o.id, o.idSet = id, true } }

// WithTracerProvider sets where the handle's spans go (default: the
// global provider).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// WithMeterProvider sets where the handle's measurements go (its
// requests' db.client.operation.duration; default: the global provider).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.mp = mp } }

// WithCloseTimeout bounds how long Close waits for the handle to stop: a
// Member, to delete its node (default 10s).
func WithCloseTimeout(d time.Duration) Option { return func(o *options) { o.closeTimeout = d } }

// WithACL sets the ACL of the nodes a Member creates (its node, and the
// group's missing parents), in place of the connection's (zk.WithACL, or
// its default). An entry without a scheme or permissions is refused
// (ErrInvalidOption), as is WithACL on Watch, which creates nothing.
func WithACL(acl ...zk.ACL) Option { return func(o *options) { o.acl, o.aclSet = acl, true } }

func newOptions(opts []Option) (options, error) {
	o := options{closeTimeout: 10 * time.Second, tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider()}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.closeTimeout <= 0:
		return o, fmt.Errorf("%w: close timeout %v: it must be positive", ErrInvalidOption, o.closeTimeout)
	case o.tp == nil:
		return o, fmt.Errorf("%w: nil tracer provider", ErrInvalidOption)
	case o.mp == nil:
		return o, fmt.Errorf("%w: nil meter provider", ErrInvalidOption)
	}
	return o, nil
}

func checkConn(conn zk.Conn, path string) error {
	if err := zk.ValidatePath(path); err != nil {
		return fmt.Errorf("group: %w", err)
	}
	switch {
	case conn == nil:
		return fmt.Errorf("%w: nil connection", ErrClosed)
	case conn.State() == zk.StateClosed:
		return fmt.Errorf("%w: connection closed", ErrClosed)
	}
	return nil
}

// Member is our membership of a group: the ephemeral node <path>/<id>
// with our data. Its methods are safe for concurrent use. Its State is
// OFFER while its node is being made (again), READY while it is there,
// FAILED once the id was found another session's (ErrMemberExists) or the
// server refused our node's delete (Leave), STOP once it left. Its events: MEMBER_JOINED (our node was made, with its
// Data and Version), MEMBER_UPDATED (SetData's data is on it),
// MEMBER_LEFT (it went: Leave, the session's end, or someone deleted it),
// OFFER_START before each make, FAILED, the session's SUSPENDED,
// RECONNECTED and LOST, START, STOP_START and STOP_COMPLETE.
type Member struct {
	conn  zk.Conn
	path  string
	id    string
	tel   *runtime.Telemetry
	shell *runtime.Shell[input, command]
}

// Join makes us a member of the group at path, as id, with data: the
// ephemeral node <path>/<id> (and the path's missing nodes, as
// containers), and returns once it is there. The node is kept for as long
// as the Member is not closed: made again, with the latest data, after a
// session's end or a deletion by someone else. An id held by another live
// session is ErrMemberExists (nothing of its is touched); a node of ours
// left by an earlier session of this connection is replaced. When ctx
// ends first, Join returns its error and deletes what it made. Errors
// before anything is sent: zk.ErrInvalidPath, ErrInvalidOption (an id
// that is not one node name, WithID), ErrClosed.
func Join(ctx context.Context, conn zk.Conn, path, id string, data []byte, opts ...Option) (*Member, error) {
	if err := checkConn(conn, path); err != nil {
		return nil, err
	}
	if id == "" || strings.Contains(id, "/") || zk.ValidatePath(zk.Join(path, id)) != nil {
		return nil, fmt.Errorf("%w: member id %q: it must be one node name", ErrInvalidOption, id)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.idSet {
		return nil, fmt.Errorf("%w: WithID: a member's id is Join's", ErrInvalidOption)
	}
	if conn, err = zk.UseACL(conn, o.acl...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	m, err := newMachine(config{Path: path, ID: id, Data: bytes.Clone(data), SessionID: conn.SessionID()})
	if err != nil {
		return nil, err
	}
	mb := &Member{conn: conn, path: path, id: id}
	mb.tel = runtime.NewTelemetry(conn, runtime.TelemetryConfig{TracerProvider: o.tp, MeterProvider: o.mp,
		Scope: ScopeName, Version: Version, Recipe: "group", Path: path, Instance: id})
	mb.shell = runtime.Run(conn, m, runtime.Spec[input, command]{
		Recipe: "group", Path: path, Instance: id, Telemetry: mb.tel,
		Exec:      mb.exec,
		Withdraw:  func(input) bool { return true },
		ErrorType: errorType, Closed: ErrClosed, CloseTimeout: o.closeTimeout, CleanupPending: ErrCleanupPending,
	})
	if _, err := mb.do(ctx, "join", func(req uint64) input { return joinCall{Req: req} }); err != nil {
		return nil, errors.Join(err, mb.Close())
	}
	return mb, nil
}

// do runs one call of the member's machine in an INTERNAL span named name.
func (m *Member) do(ctx context.Context, name string, mk func(req uint64) input) (runtime.Answer, error) {
	ctx, span := m.tel.Start(ctx, name, trace.SpanKindInternal)
	defer span.End()
	a, err := m.shell.Do(ctx, mk)
	runtime.Fail(span, err, errorType(err))
	return a, err
}

// SetData makes data our node's data, and returns once it is there (or
// ctx's error: the data is written all the same). After a session's end
// the node is made again with the latest SetData's data. Errors:
// ErrMemberExists (FAILED), ErrClosed.
func (m *Member) SetData(ctx context.Context, data []byte) error {
	data = bytes.Clone(data)
	_, err := m.do(ctx, "set", func(req uint64) input { return setCall{Req: req, Data: data} })
	return err
}

// Leave deletes our node and ends the member (as Close does, but bounded
// by ctx): it returns once the node is gone. When ctx ends first, Leave
// returns its error, and the member goes on deleting its node, once the
// connection is back, until its session ends; Close waits for it. When
// the server refuses the delete (an ACL that does not let us delete the
// node: zk.ErrNoAuth), Leave returns that error, wrapped, and the member
// is FAILED with it, its node still there (until the session ends): it
// makes nothing more, and Leave or Close tries the delete again.
func (m *Member) Leave(ctx context.Context) error {
	_, err := m.do(ctx, "leave", func(req uint64) input { return leaveCall{Req: req} })
	if err != nil {
		return err
	}
	return m.Close()
}

// Close leaves the group: our node is deleted, waiting at most
// WithCloseTimeout (then ErrCleanupPending: the connection's janitor
// deletes it once the session is back). A delete the server refuses is
// Close's error, as Leave's. A member whose connection is closed stops by
// itself (the server deleted its node).
func (m *Member) Close() error { return m.shell.Close() }

// Path is the group's path.
func (m *Member) Path() string { return m.path }

// ID is our member id.
func (m *Member) ID() string { return m.id }

// Node is our member node: <path>/<id>.
func (m *Member) Node() string { return zk.Join(m.path, m.id) }

// State is the member's machine's state (see Member).
func (m *Member) State() events.State { return m.shell.State() }

// Subscribe returns a subscription to the member's events (see Member).
func (m *Member) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return m.shell.Subscribe(opts...)
}

// Group follows the members of a group (Curator's GroupMember's
// getCurrentMembers, kazoo's Party), on a children cache of its path
// (machines/cache). Its State is START until the first load is done,
// READY after, STOP once closed. Its events: MEMBER_JOINED,
// MEMBER_UPDATED, MEMBER_LEFT (each with the member's node as Node, its
// Data and Version, in the server's order for each member), INITIALIZED
// once after the first load, the session's SUSPENDED, RECONNECTED and
// LOST, START, STOP_START and STOP_COMPLETE.
type Group struct {
	path string
	id   string
	cc   *cache.ChildrenCache
	bus  *events.Bus
	fwd  sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Watch follows the members of the group at path (a group whose path
// does not exist yet is empty until it does). Errors before anything is
// sent: zk.ErrInvalidPath, ErrInvalidOption (WithACL), ErrClosed.
func Watch(conn zk.Conn, path string, opts ...Option) (*Group, error) {
	if err := checkConn(conn, path); err != nil {
		return nil, err
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.aclSet {
		return nil, fmt.Errorf("%w: WithACL: a group watch creates nothing", ErrInvalidOption)
	}
	if o.id == "" {
		o.id = uuid.NewString()
	}
	cc, err := cache.NewChildren(conn, path, cache.WithID(o.id), cache.WithTracerProvider(o.tp),
		cache.WithMeterProvider(o.mp), cache.WithCloseTimeout(o.closeTimeout))
	if err != nil {
		return nil, translate(err)
	}
	g := &Group{path: path, id: o.id, cc: cc, bus: events.NewBus()}
	sub := cc.Subscribe()
	g.fwd.Go(func() {
		defer g.bus.Close()
		for ev := range sub.C {
			ev.Recipe = "group"
			switch ev.Type {
			case events.NodeAdded:
				ev.Type = events.MemberJoined
			case events.NodeUpdated:
				ev.Type = events.MemberUpdated
			case events.NodeRemoved:
				ev.Type = events.MemberLeft
			}
			g.bus.Publish(ev)
		}
	})
	return g, nil
}

// Members is a snapshot of the group: each member's id and data. A
// member whose event a subscriber got is in it (or a later state).
func (g *Group) Members() map[string][]byte {
	kids := g.cc.Children()
	ms := make(map[string][]byte, len(kids))
	for name, n := range kids {
		ms[name] = n.Data
	}
	return ms
}

// Initialized returns once the first load of the members is done (at once
// after it), or ctx's error, or ErrClosed.
func (g *Group) Initialized(ctx context.Context) error { return translate(g.cc.Initialized(ctx)) }

// Path is the group's path.
func (g *Group) Path() string { return g.path }

// ID is the Group's WithID, or a UUID made for it.
func (g *Group) ID() string { return g.id }

// State is START until the first load is done, READY after, STOP once
// closed.
func (g *Group) State() events.State { return g.cc.State() }

// Subscribe returns a subscription to the group's events (see Group): it
// gets START first and, once the first load is done, INITIALIZED.
func (g *Group) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return g.bus.Subscribe(opts...)
}

// Close stops following the group: Members stays as it was, the
// subscriptions end. A Group whose connection is closed stops by itself.
// Every later call returns the first one's result.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		g.closeErr = translate(g.cc.Close())
		g.fwd.Wait()
	})
	return g.closeErr
}

// translate makes the cache's sentinels the group's.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cache.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, cache.ErrInvalidOption):
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return err
}

func errorType(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{ErrMemberExists, "member_exists"}, {ErrSessionLost, "session_lost"}, {ErrClosed, "closed"},
		{ErrCleanupPending, "cleanup_pending"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return runtime.ZKErrorType(err)
}
