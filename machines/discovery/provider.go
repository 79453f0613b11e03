package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/group"
)

// Strategy is how a Provider's Instance picks among the instances.
type Strategy int

const (
	// RoundRobin takes the instances in turn, in ID order (the default;
	// Curator's RoundRobinStrategy).
	RoundRobin Strategy = iota
	// Random takes one at random each time (RandomStrategy).
	Random
	// Sticky takes the same instance until it leaves, then the next one
	// round robin (StickyStrategy over RoundRobinStrategy).
	Sticky
)

// WithStrategy sets how a Provider's Instance picks (default RoundRobin).
// Register refuses it, and NewProvider a strategy that is none of the
// three (ErrInvalidOption).
func WithStrategy(s Strategy) Option {
	return func(o *options) { o.strategy, o.strategySet = s, true }
}

// Provider follows the instances of one service (Curator's
// ServiceProvider on a ServiceCache): a group watch (machines/group) of
// <base>/<name> whose members' JSON it decodes as they change. Its
// methods are safe for concurrent use; Instance and Instances read
// memory only. Its State is START until the first load is done, READY
// after, STOP once closed. Its events are its group's, as Recipe
// "discovery": MEMBER_JOINED, MEMBER_UPDATED, MEMBER_LEFT (each with the
// instance's node, its JSON as Data, and its Version; one whose JSON does
// not decode carries ErrBadInstance and is left out of Instances),
// INITIALIZED once after the first load, the session's SUSPENDED,
// RECONNECTED and LOST, START, STOP_START and STOP_COMPLETE. An event
// comes after Instances shows its change (or a later one).
type Provider struct {
	path     string
	strategy Strategy
	g        *group.Group
	bus      *events.Bus
	fwd      sync.WaitGroup
	ready    chan struct{} // closed at INITIALIZED
	done     chan struct{} // closed when the group's events end

	snap    atomic.Pointer[[]Instance] // sorted by ID
	seen    map[string]decoded         // the forwarder's: each member's data, decoded
	next    atomic.Uint64              // RoundRobin's turn
	mu      sync.Mutex
	stickTo string // Sticky's instance

	closeOnce sync.Once
	closeErr  error
}

type decoded struct {
	data []byte
	inst Instance
	err  error
}

// NewProvider follows the service name under base (a service with no
// node yet has no instances until it has). Errors before anything is
// sent: zk.ErrInvalidPath (base), ErrInvalidOption (a name that is not
// one node name, WithACL, an unknown strategy), ErrClosed.
func NewProvider(conn zk.Conn, base, name string, opts ...Option) (*Provider, error) {
	if err := zk.ValidatePath(base); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if name == "" || strings.Contains(name, "/") || zk.ValidatePath(zk.Join(base, name)) != nil {
		return nil, fmt.Errorf("%w: name %q: it must be one node name", ErrInvalidOption, name)
	}
	o := newOptions(opts)
	if o.strategy < RoundRobin || o.strategy > Sticky {
		return nil, fmt.Errorf("%w: strategy %d", ErrInvalidOption, o.strategy)
	}
	g, err := group.Watch(conn, zk.Join(base, name), o.group...)
	if err != nil {
		return nil, translate(err)
	}
	p := &Provider{path: zk.Join(base, name), strategy: o.strategy, g: g, bus: events.NewBus(),
		ready: make(chan struct{}), done: make(chan struct{}), seen: map[string]decoded{}}
	p.snap.Store(&[]Instance{})
	sub := g.Subscribe()
	p.fwd.Go(func() {
		defer close(p.done)
		defer p.bus.Close()
		for ev := range sub.C {
			ev.Recipe = "discovery"
			switch ev.Type {
			case events.MemberJoined, events.MemberUpdated:
				if _, err := decode(ev.Data); err != nil {
					ev.Err = fmt.Errorf("%s: %w", ev.Node, err)
				}
				p.refresh()
			case events.MemberLeft:
				p.refresh()
			case events.Initialized:
				p.refresh()
				close(p.ready)
			}
			p.bus.Publish(ev)
		}
	})
	return p, nil
}

// refresh makes the snapshot the group's members now, decoding only the
// data that changed. A subscriber that came late to the group's events
// (they replay only START and INITIALIZED) is right from its first event
// on, and never goes back to an older state.
func (p *Provider) refresh() {
	ms := p.g.Members()
	seen := make(map[string]decoded, len(ms))
	insts := make([]Instance, 0, len(ms))
	for id, data := range ms {
		d, ok := p.seen[id]
		if !ok || !bytes.Equal(d.data, data) {
			d.data = data
			d.inst, d.err = decode(data)
		}
		seen[id] = d
		if d.err == nil {
			insts = append(insts, d.inst)
		}
	}
	slices.SortFunc(insts, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
	p.seen = seen
	p.snap.Store(&insts)
}

// Instances is the service's instances, sorted by ID: those whose JSON
// decodes. Those of an event a subscriber got are in it (or a later
// state). After Close it stays as it was.
func (p *Provider) Instances() []Instance { return slices.Clone(*p.snap.Load()) }

// Instance picks one of the service's instances by the provider's
// strategy, from memory: it waits only for the first load (Initialized).
// Errors: ErrNoInstances, ctx's, ErrClosed.
func (p *Provider) Instance(ctx context.Context) (Instance, error) {
	if err := p.Initialized(ctx); err != nil {
		return Instance{}, err
	}
	insts := *p.snap.Load()
	if len(insts) == 0 {
		return Instance{}, fmt.Errorf("%w in %s", ErrNoInstances, p.path)
	}
	rr := func() Instance { return insts[(p.next.Add(1)-1)%uint64(len(insts))] }
	switch p.strategy {
	case Random:
		return insts[rand.IntN(len(insts))], nil
	case Sticky:
		p.mu.Lock()
		defer p.mu.Unlock()
		if i, ok := slices.BinarySearchFunc(insts, p.stickTo, func(in Instance, id string) int { return strings.Compare(in.ID, id) }); ok {
			return insts[i], nil
		}
		inst := rr()
		p.stickTo = inst.ID
		return inst, nil
	}
	return rr(), nil
}

// Initialized returns once the first load of the service is done (at
// once after it), or ctx's error, or ErrClosed.
func (p *Provider) Initialized(ctx context.Context) error {
	select {
	case <-p.done:
		return fmt.Errorf("%w: provider of %s", ErrClosed, p.path)
	default:
	}
	select {
	case <-p.ready: // before an ended ctx: Instance serves from memory
		return nil
	default:
	}
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return fmt.Errorf("%w: provider of %s", ErrClosed, p.path)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Path is the service's path: <base>/<name>.
func (p *Provider) Path() string { return p.path }

// ID is the Provider's WithID, or a UUID made for it.
func (p *Provider) ID() string { return p.g.ID() }

// State is START until the first load is done, READY after, STOP once
// closed.
func (p *Provider) State() events.State { return p.g.State() }

// Subscribe returns a subscription to the provider's events (see
// Provider): it gets START first and, once the first load is done,
// INITIALIZED.
func (p *Provider) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return p.bus.Subscribe(opts...)
}

// Close stops following the service: Instances stays as it was, the
// subscriptions end, Instance and Initialized return ErrClosed. A
// Provider whose connection is closed stops by itself. Every later call
// returns the first one's result.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.closeErr = translate(p.g.Close())
		p.fwd.Wait()
	})
	return p.closeErr
}

// Services lists the services under base: its children, sorted. A base
// that does not exist has none (Curator's queryForNames throws
// NoNodeException there). Errors before anything is sent:
// zk.ErrInvalidPath, ErrClosed.
func Services(ctx context.Context, conn zk.Conn, base string) ([]string, error) {
	if err := zk.ValidatePath(base); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if conn == nil || conn.State() == zk.StateClosed {
		return nil, fmt.Errorf("%w: connection closed", ErrClosed)
	}
	names, _, err := conn.Children(ctx, base)
	if errors.Is(err, zk.ErrNoNode) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovery: services under %s: %w", base, err)
	}
	slices.Sort(names)
	return names, nil
}
