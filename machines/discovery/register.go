package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Option configures a Registration (Register) or a Provider
// (NewProvider). A nil Option is ignored.
type Option func(*options)

type options struct {
	group       []group.Option
	tp          trace.TracerProvider
	mp          metric.MeterProvider
	strategy    Strategy
	strategySet bool
}

// WithID names a Provider on its events and spans, and is its ID
// (default: a UUID). Register refuses it (ErrInvalidOption): a
// registration's ID is its instance's.
func WithID(id string) Option { return groupOption(group.WithID(id)) }

// WithTracerProvider sets where the handle's spans go (default: the
// global provider). A nil provider is refused (ErrInvalidOption).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp; o.group = append(o.group, group.WithTracerProvider(tp)) }
}

// WithMeterProvider sets where the handle's measurements go (its
// requests' db.client.operation.duration; default: the global provider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.mp = mp; o.group = append(o.group, group.WithMeterProvider(mp)) }
}

// WithCloseTimeout bounds how long Close waits for the handle to stop: a
// Registration, to delete its node (default 10s).
func WithCloseTimeout(d time.Duration) Option { return groupOption(group.WithCloseTimeout(d)) }

// WithACL sets the ACL of the nodes Register creates (the instance's
// node, and the base's and service's missing nodes), in place of the
// connection's. NewProvider refuses it (ErrInvalidOption).
func WithACL(acl ...zk.ACL) Option { return groupOption(group.WithACL(acl...)) }

func groupOption(g group.Option) Option {
	return func(o *options) { o.group = append(o.group, g) }
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Registration is an instance registered in a service: a group member
// (machines/group) of <base>/<name>, whose id is the instance's and whose
// data is its JSON. Its methods are safe for concurrent use. Its State
// and events are its member's (Recipe "group"): OFFER while its node is
// being made (again), READY while it is there, FAILED once another live
// session took its id (ErrInstanceExists), STOP once closed; START,
// OFFER_START, MEMBER_JOINED, MEMBER_UPDATED, MEMBER_LEFT, FAILED, the
// session's SUSPENDED, RECONNECTED and LOST, STOP_START and STOP_COMPLETE.
type Registration struct {
	base string
	tel  *runtime.Telemetry
	m    *group.Member

	mu   sync.Mutex
	inst Instance // the latest registered

	closeOnce sync.Once
	closeErr  error
}

// Register registers inst in the service inst.Name under base: the
// ephemeral node <base>/<name>/<id> with inst's JSON, made (with base's
// and the service's missing nodes, as containers) before Register
// returns, and kept, with the latest Update's data, until Close: made
// again after a session's end or a deletion by someone else. An id held
// by another live session is ErrInstanceExists. When ctx ends first,
// Register returns its error and deletes what it made. Errors before
// anything is sent: zk.ErrInvalidPath (base), ErrInvalidOption (see
// checkInstance's rules in Instance: name and id one node name each, a
// DYNAMIC type, JSON payload; WithStrategy, WithID), ErrClosed.
func Register(ctx context.Context, conn zk.Conn, base string, inst Instance, opts ...Option) (*Registration, error) {
	if err := checkInstance(base, inst); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	if o.strategySet {
		return nil, fmt.Errorf("%w: WithStrategy: a registration picks nothing", ErrInvalidOption)
	}
	if inst.ServiceType == "" {
		inst.ServiceType = "DYNAMIC"
	}
	if inst.RegistrationTimeUTC.IsZero() {
		inst.RegistrationTimeUTC = time.UnixMilli(time.Now().UnixMilli()).UTC() // as the node has it
	}
	data, err := encode(inst)
	if err != nil {
		return nil, err
	}
	r := &Registration{base: base, inst: inst, tel: runtime.NewTelemetry(conn, runtime.TelemetryConfig{
		TracerProvider: o.tp, MeterProvider: o.mp, Scope: ScopeName, Version: Version, Recipe: "discovery",
		Path: zk.Join(base, inst.Name), Instance: inst.ID})}
	ctx, span := r.tel.Start(ctx, "register", trace.SpanKindInternal)
	defer span.End()
	r.m, err = group.Join(ctx, conn, zk.Join(base, inst.Name), inst.ID, data, o.group...)
	err = translate(err)
	runtime.Fail(span, err, errorType(err))
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Update makes inst the registered instance: its JSON is written on our
// node, and kept there (made again with it after a session's end). Its
// Name and ID must be the registration's (ErrInvalidOption); a zero
// RegistrationTimeUTC keeps the registered one. When ctx ends first,
// Update returns its error, and the data is written all the same.
// Errors: ErrInstanceExists (FAILED), ErrClosed.
func (r *Registration) Update(ctx context.Context, inst Instance) error {
	r.mu.Lock()
	old := r.inst
	r.mu.Unlock()
	if inst.Name != old.Name || inst.ID != old.ID {
		return fmt.Errorf("%w: Update of %s/%s with %s/%s: the name and id are the registration's", ErrInvalidOption, old.Name, old.ID, inst.Name, inst.ID)
	}
	if err := checkInstance(r.base, inst); err != nil {
		return err
	}
	if inst.ServiceType == "" {
		inst.ServiceType = "DYNAMIC"
	}
	if inst.RegistrationTimeUTC.IsZero() {
		inst.RegistrationTimeUTC = old.RegistrationTimeUTC
	}
	data, err := encode(inst)
	if err != nil {
		return err
	}
	ctx, span := r.tel.Start(ctx, "update", trace.SpanKindInternal)
	defer span.End()
	err = translate(r.m.SetData(ctx, data))
	runtime.Fail(span, err, errorType(err))
	if err == nil {
		r.mu.Lock()
		r.inst = inst
		r.mu.Unlock()
	}
	return err
}

// Instance is the registered instance (Register's, or the latest
// Update's), with its RegistrationTimeUTC and ServiceType set.
func (r *Registration) Instance() Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inst
}

// Close deregisters: our node is deleted, waiting at most
// WithCloseTimeout (then ErrCleanupPending: the connection deletes it
// once the session is back). Every later call returns the first one's
// result; every other method then returns ErrClosed.
func (r *Registration) Close() error {
	r.closeOnce.Do(func() { r.closeErr = translate(r.m.Close()) })
	return r.closeErr
}

// Path is the service's path: <base>/<name>.
func (r *Registration) Path() string { return r.m.Path() }

// ID is the instance's id.
func (r *Registration) ID() string { return r.m.ID() }

// Node is the instance's node: <base>/<name>/<id>.
func (r *Registration) Node() string { return r.m.Node() }

// State is the registration's member's state (see Registration).
func (r *Registration) State() events.State { return r.m.State() }

// Subscribe returns a subscription to the registration's events (see
// Registration).
func (r *Registration) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return r.m.Subscribe(opts...)
}

// translate makes group's sentinels discovery's.
func translate(err error) error {
	for _, p := range [...]struct{ from, to error }{{group.ErrClosed, ErrClosed}, {group.ErrInvalidOption, ErrInvalidOption},
		{group.ErrMemberExists, ErrInstanceExists}, {group.ErrCleanupPending, ErrCleanupPending}} {
		if errors.Is(err, p.from) {
			return fmt.Errorf("%w: %w", p.to, err)
		}
	}
	return err
}

func errorType(err error) string {
	for _, c := range [...]struct {
		err  error
		name string
	}{{ErrInstanceExists, "instance_exists"}, {ErrClosed, "closed"}, {ErrCleanupPending, "cleanup_pending"}, {ErrInvalidOption, "invalid_option"}} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return runtime.ZKErrorType(err)
}
