package grpcresolver_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes/adapters/grpcresolver"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const wait = 20 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serve starts a gRPC server with the health service on a loopback port,
// stopped at the end of the test, and returns its address.
func serve(t *testing.T) *net.TCPAddr {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().(*net.TCPAddr)
}

// register registers the instance id of "api" at addr on conn, closed at
// the end of the test.
func register(ctx context.Context, t *testing.T, conn zk.Conn, id string, addr *net.TCPAddr) *discovery.Registration {
	t.Helper()
	r, err := discovery.Register(ctx, conn, "/services", discovery.Instance{
		Name: "api", ID: id, Address: addr.IP.String(), Port: addr.Port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close %s: %v", id, err)
		}
	})
	return r
}

// states records what a resolver gives its channel (the addresses of each
// UpdateState, and the errors), passing it on to the channel it wraps
// when there is one.
type states struct {
	resolver.ClientConn // nil: a channel of its own
	mu                  sync.Mutex
	got                 [][]string
	errs                []error
	wake                chan struct{}
}

func newStates() *states { return &states{wake: make(chan struct{}, 1)} }

func (s *states) UpdateState(st resolver.State) error {
	var addrs []string
	var bad error
	for i, a := range st.Addresses {
		addrs = append(addrs, a.Addr)
		if len(st.Endpoints) != len(st.Addresses) || !slices.Equal(st.Endpoints[i].Addresses, []resolver.Address{a}) {
			bad = fmt.Errorf("endpoints %v do not match addresses %v", st.Endpoints, st.Addresses)
		}
	}
	var err error
	if s.ClientConn != nil {
		err = s.ClientConn.UpdateState(st)
	}
	s.mu.Lock()
	s.got = append(s.got, addrs)
	if bad != nil {
		s.errs = append(s.errs, bad)
	}
	s.mu.Unlock()
	s.notify()
	return err
}

func (s *states) ReportError(err error) {
	if s.ClientConn != nil {
		s.ClientConn.ReportError(err)
	}
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
	s.notify()
}

func (s *states) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *states) snapshot() ([][]string, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got), slices.Clone(s.errs)
}

// waitLast waits until the latest state the channel got (after the call
// returned: the channel has applied it) has the addresses want.
func (s *states) waitLast(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		got, errs := s.snapshot()
		if len(errs) > 0 {
			t.Fatalf("errors: %v", errs)
		}
		if len(got) > 0 && slices.Equal(got[len(got)-1], want) {
			return
		}
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatalf("states %q, want the last %q", got, want)
		}
	}
}

// waitErr waits for the first error reported to the channel.
func (s *states) waitErr(t *testing.T) error {
	t.Helper()
	deadline := time.After(wait)
	for {
		if _, errs := s.snapshot(); len(errs) > 0 {
			return errs[0]
		}
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatal("no error reported")
		}
	}
}

// recording is a Builder whose resolvers' channels are recorded in s.
type recording struct {
	*grpcresolver.Builder
	s *states
}

func (b recording) Build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions) (resolver.Resolver, error) {
	b.s.ClientConn = cc
	return b.Builder.Build(target, b.s, opts)
}

// dial opens a round-robin channel to target with the builder b, closed at
// the end of the test.
func dial(t *testing.T, target string, b resolver.Builder) healthpb.HealthClient {
	cc, err := grpc.NewClient(target, grpc.WithResolvers(b),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// answer makes one call and returns the address of the server that
// answered it.
func answer(ctx context.Context, t *testing.T, hc healthpb.HealthClient) string {
	t.Helper()
	var p peer.Peer
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if _, err := hc.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		t.Fatalf("call: %v", err)
	}
	return p.Addr.String()
}

// reachesAll calls until each of want has answered, and fails on an
// answer from another server.
func reachesAll(ctx context.Context, t *testing.T, hc healthpb.HealthClient, want ...string) {
	t.Helper()
	seen := map[string]bool{}
	deadline := time.Now().Add(wait)
	for len(seen) < len(want) {
		a := answer(ctx, t, hc)
		if !slices.Contains(want, a) {
			t.Fatalf("answered by %s, not one of %q", a, want)
		}
		seen[a] = true
		if time.Now().After(deadline) {
			t.Fatalf("answered by %v only, want %q", seen, want)
		}
	}
}

// gated is a Conn whose creates of one ephemeral node wait, while the gate
// is shut, until it opens (or their ctx ends).
type gated struct {
	zk.Conn
	node string
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (c *gated) shut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gate = make(chan struct{})
}

func (c *gated) open() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gate != nil {
		close(c.gate)
		c.gate = nil
	}
}

func (c *gated) Create(ctx context.Context, path string, data []byte, mode zk.CreateMode) (string, error) {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil && path == c.node && mode == zk.ModeEphemeral {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return c.Conn.Create(ctx, path, data, mode)
}
