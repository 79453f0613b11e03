package grpcresolver

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
)

// Scheme is the scheme of the targets a Builder resolves: zk:///<service>.
const Scheme = "zk"

// ErrInvalidTarget: Build was given a target that does not name one
// service: zk:///<service>, with no authority, the service one node name
// (matches zkrecipes.ErrInvalidOption).
var ErrInvalidTarget = fmt.Errorf("grpcresolver: %w", zkrecipes.ErrInvalidOption)

// Option configures a Builder. A nil Option is ignored.
type Option func(*options)

type options struct {
	provider []discovery.Option
}

// WithProviderOptions passes opts to the discovery.NewProvider each Build
// makes: its WithID, WithTracerProvider, WithMeterProvider (default: none).
// WithStrategy changes nothing here: the channel's load-balancing policy
// picks among the addresses. An option NewProvider refuses makes Build
// fail with its error.
func WithProviderOptions(opts ...discovery.Option) Option {
	return func(o *options) { o.provider = append(o.provider, opts...) }
}

// Builder is a gRPC resolver.Builder for the scheme "zk": each Build
// follows one service under its base with a discovery.Provider on its
// connection. Register it on a channel with grpc.WithResolvers, or for
// the whole process with resolver.Register.
type Builder struct {
	conn zk.Conn
	base string
	opts []discovery.Option
}

// NewBuilder returns a Builder resolving zk:///<service> to the instances
// of <base>/<service> registered on conn's ensemble (discovery.Register,
// or Curator's ServiceDiscovery). The connection stays the caller's:
// close it after the channels that use it. Its base is checked by Build
// (zk.ErrInvalidPath), as nothing is sent before.
func NewBuilder(conn zk.Conn, base string, opts ...Option) *Builder {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return &Builder{conn: conn, base: base, opts: o.provider}
}

// Scheme is "zk".
func (b *Builder) Scheme() string { return Scheme }

// Build starts following the target's service: a discovery.Provider of
// <base>/<service>, whose every change after its first load is pushed to
// cc. Errors before anything is sent: ErrInvalidTarget, and
// discovery.NewProvider's (zk.ErrInvalidPath for the base,
// discovery.ErrInvalidOption, discovery.ErrClosed).
func (b *Builder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	name := target.Endpoint()
	if target.URL.Host != "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%w: %q: want %s:///<service>, the service one node name", ErrInvalidTarget, target.URL.String(), Scheme)
	}
	p, err := discovery.NewProvider(b.conn, b.base, name, b.opts...)
	if err != nil {
		return nil, fmt.Errorf("grpcresolver: %s: %w", target.URL.String(), err)
	}
	r := &zkResolver{p: p, cc: cc, closing: make(chan struct{})}
	sub := p.Subscribe()
	r.run.Go(func() { r.follow(sub) })
	return r, nil
}

// zkResolver pushes its provider's instances to a channel.
type zkResolver struct {
	p       *discovery.Provider
	cc      resolver.ClientConn
	run     sync.WaitGroup
	closing chan struct{}
	once    sync.Once
}

// follow pushes the instances' addresses at the first load and then at
// each change of them, until the provider stops. One that stops by itself
// (its connection was closed) is reported to the channel.
func (r *zkResolver) follow(sub *events.Subscription) {
	defer sub.Close()
	var last []string
	initialized := false
	for ev := range sub.C {
		select {
		case <-r.closing:
			return
		default:
		}
		if ev.Type == events.StopComplete {
			r.cc.ReportError(fmt.Errorf("grpcresolver: %s: %w", r.p.Path(), discovery.ErrClosed))
			return
		}
		initialized = initialized || ev.Type == events.Initialized
		if !initialized {
			continue
		}
		addrs := addresses(r.p.Instances())
		if last != nil && slices.Equal(addrs, last) {
			continue // a payload changed, or a session event
		}
		last = addrs
		// An error (the policy refuses no addresses) needs no retry: the
		// next change comes by itself.
		_ = r.cc.UpdateState(state(addrs))
	}
}

// addresses is each instance's host:port, sorted, without duplicates:
// its Port, or its SSLPort when it has no Port. An instance with neither,
// or without an address, is left out.
func addresses(insts []discovery.Instance) []string {
	addrs := []string{}
	for _, in := range insts {
		port := in.Port
		if port == 0 {
			port = in.SSLPort
		}
		if in.Address != "" && port != 0 {
			addrs = append(addrs, net.JoinHostPort(in.Address, strconv.Itoa(port)))
		}
	}
	slices.Sort(addrs)
	return slices.Compact(addrs)
}

func state(addrs []string) resolver.State {
	s := resolver.State{Addresses: []resolver.Address{}, Endpoints: []resolver.Endpoint{}}
	for _, a := range addrs {
		addr := resolver.Address{Addr: a}
		s.Addresses = append(s.Addresses, addr)
		s.Endpoints = append(s.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{addr}})
	}
	return s
}

// ResolveNow does nothing: the provider's cache is kept by ZooKeeper's
// watches, which push every change as it happens, so there is nothing to
// read again.
func (r *zkResolver) ResolveNow(resolver.ResolveNowOptions) {}

// Close closes the provider and returns once its goroutine has ended: no
// call reaches the channel after it.
func (r *zkResolver) Close() {
	r.once.Do(func() {
		close(r.closing)
		_ = r.p.Close()
		r.run.Wait()
	})
}
