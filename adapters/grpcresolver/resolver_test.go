package grpcresolver_test

import (
	"errors"
	"net"
	"net/url"
	"slices"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/grpcresolver"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// calls is how many calls must all go to the one server left: with two
// in round robin, half of them would go to the other.
const calls = 10

// Two gRPC servers registered in discovery, each on its own session: a
// round-robin channel through the resolver reaches both; once one's
// session expires (and until its registration is made again) only the
// other; then both again.
func TestFollowsRegistrations(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a1, a2 := serve(t).String(), serve(t).String()
		all := slices.Sorted(slices.Values([]string{a1, a2}))
		c1 := tg.Connect(t)
		g1 := &gated{Conn: c1, node: "/services/api/s-1"}
		register(ctx, t, g1, "s-1", tcp(t, a1))
		register(ctx, t, tg.Connect(t), "s-2", tcp(t, a2))
		s := newStates()
		hc := dial(t, "zk:///api", recording{grpcresolver.NewBuilder(tg.Connect(t), "/services"), s})

		reachesAll(ctx, t, hc, a1, a2)
		s.waitLast(t, all...)

		g1.shut()
		t.Cleanup(g1.open)
		tg.Expire(t, c1)
		s.waitLast(t, a2)
		for range calls {
			if a := answer(ctx, t, hc); a != a2 {
				t.Fatalf("answered by %s after its session expired", a)
			}
		}

		g1.open()
		s.waitLast(t, all...)
		reachesAll(ctx, t, hc, a1, a2)
		if _, errs := s.snapshot(); len(errs) > 0 {
			t.Errorf("errors reported: %v", errs)
		}
	})
}

// A closed resolver leaves no goroutine, tells the channel nothing more,
// and sets no watch again: those its provider left fire once, at the
// next change of their nodes, and are gone.
func TestCloseLeavesNothing(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		conn, rc := tg.Connect(t), tg.Connect(t)
		r1 := register(ctx, t, rc, "s-1", tcp(t, "127.0.0.1:1001"))
		r2 := register(ctx, t, rc, "s-2", tcp(t, "127.0.0.1:1002"))
		before := goleak.IgnoreCurrent()
		s := newStates()
		r := build(t, conn, "zk:///api", s)
		s.waitLast(t, "127.0.0.1:1001", "127.0.0.1:1002")
		r.Close()
		r.Close() // a second Close does nothing
		got, _ := s.snapshot()

		if _, err := rc.Create(ctx, "/services/api/x", nil, zk.ModePersistent); err != nil {
			t.Fatal(err) // fires the child watch
		}
		if _, err := rc.Set(ctx, "/services/api", []byte("x"), zk.AnyVersion); err != nil {
			t.Fatal(err) // fires the service node's data watch
		}
		for _, r := range []*discovery.Registration{r1, r2} {
			if err := r.Close(); err != nil { // fires each data watch
				t.Fatal(err)
			}
		}
		if err := rc.Delete(ctx, "/services/api/x", zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if ws := testkit.WatchedPaths(t, tg, conn); len(ws) != 0 {
			t.Errorf("watches left on %q", ws)
		}
		if err := goleak.Find(before); err != nil {
			t.Errorf("goroutines left: %v", err)
		}
		if after, errs := s.snapshot(); len(after) != len(got) || len(errs) != 0 {
			t.Errorf("after Close the channel got %q, errors %v", after[len(got):], errs)
		}
	})
}

// What the channel gets from each instance: host:port from Address and
// Port, SSLPort when there is no Port, nothing without an address or a
// port, one address for two instances that share it; IPv6 in brackets.
func TestAddresses(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		rc := tg.Connect(t)
		for _, in := range []discovery.Instance{
			{ID: "plain", Address: "10.0.0.1", Port: 80},
			{ID: "both", Address: "10.0.0.2", Port: 80, SSLPort: 443},
			{ID: "ssl", Address: "10.0.0.3", SSLPort: 443},
			{ID: "noport", Address: "10.0.0.4"},
			{ID: "noaddress", Port: 80},
			{ID: "same", Address: "10.0.0.1", Port: 80},
			{ID: "v6", Address: "::1", Port: 80},
		} {
			in.Name = "api"
			r, err := discovery.Register(ctx, rc, "/services", in)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
		}
		s := newStates()
		r := build(t, tg.Connect(t), "zk:///api", s)
		defer r.Close()
		s.waitLast(t, "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:443", "[::1]:80")
	})
}

// A service with no instance: the channel gets no address, its calls
// fail (UNAVAILABLE), and one that waits for ready goes through once an
// instance registers.
func TestNoInstances(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		s := newStates()
		hc := dial(t, "zk:///api", recording{grpcresolver.NewBuilder(tg.Connect(t), "/services"), s})
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("a call with no instance: %v", err)
		}
		s.waitLast(t)
		done := make(chan error, 1)
		go func() {
			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
			done <- err
		}()
		a := serve(t)
		register(ctx, t, tg.Connect(t), "s-1", a)
		if err := <-done; err != nil {
			t.Fatalf("a call waiting for ready: %v", err)
		}
		s.waitLast(t, a.String())
	})
}

// A target that does not name one service, or a bad base, is refused by
// Build, before anything is sent; so is a closed connection. The
// connection closed under a resolver is reported to its channel.
func TestBuildErrors(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		conn := tg.Connect(t)
		for _, tc := range []struct {
			name, base, target string
			want               error
		}{
			{"no service", "/services", "zk:///", grpcresolver.ErrInvalidTarget},
			{"a path", "/services", "zk:///api/v1", grpcresolver.ErrInvalidTarget},
			{"an escaped slash", "/services", "zk:///api%2Fv1", grpcresolver.ErrInvalidTarget},
			{"an authority", "/services", "zk://ensemble/api", grpcresolver.ErrInvalidTarget},
			{"a relative base", "services", "zk:///api", zk.ErrInvalidPath},
		} {
			t.Run(tc.name, func(t *testing.T) {
				u, err := url.Parse(tc.target)
				if err != nil {
					t.Fatal(err)
				}
				r, err := grpcresolver.NewBuilder(conn, tc.base).Build(resolver.Target{URL: *u}, newStates(), resolver.BuildOptions{})
				if !errors.Is(err, tc.want) || r != nil {
					t.Errorf("Build: %v, want %v", err, tc.want)
				}
			})
		}
		if !errors.Is(grpcresolver.ErrInvalidTarget, zkrecipes.ErrInvalidOption) {
			t.Error("ErrInvalidTarget does not match zkrecipes.ErrInvalidOption")
		}
		// The provider's options reach NewProvider, which refuses this one.
		acl := grpcresolver.WithProviderOptions(discovery.WithACL(zk.WorldACL(zk.PermAll)...))
		api := resolver.Target{URL: url.URL{Scheme: "zk", Path: "/api"}}
		if _, err := grpcresolver.NewBuilder(conn, "/services", acl, nil).Build(api, newStates(), resolver.BuildOptions{}); !errors.Is(err, discovery.ErrInvalidOption) {
			t.Errorf("Build with WithACL: %v, want discovery.ErrInvalidOption", err)
		}
		if b := grpcresolver.NewBuilder(conn, "/services"); b.Scheme() != "zk" {
			t.Errorf("scheme %q", b.Scheme())
		}

		c := tg.Connect(t)
		s := newStates()
		r := build(t, c, "zk:api", s) // zk:<service> names the service too
		defer r.Close()
		s.waitLast(t)
		c.Close()
		if err := s.waitErr(t); !errors.Is(err, discovery.ErrClosed) {
			t.Errorf("reported %v", err)
		}
		if _, err := grpcresolver.NewBuilder(c, "/services").Build(api, newStates(), resolver.BuildOptions{}); !errors.Is(err, discovery.ErrClosed) {
			t.Errorf("Build on a closed connection: %v", err)
		}
	})
}

// build builds a resolver of target on conn with base /services, its
// channel s.
func build(t *testing.T, conn zk.Conn, target string, s *states) resolver.Resolver {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r, err := grpcresolver.NewBuilder(conn, "/services").Build(resolver.Target{URL: *u}, s, resolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tcp(t *testing.T, addr string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
