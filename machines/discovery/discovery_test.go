package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Two instances register; a provider on another session sees each, with
// its payload as registered, and each change of an Update; Close
// deregisters; Services lists the service.
func TestRegisterDiscover(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		p := must[*discovery.Provider](t)(discovery.NewProvider(tg.Connect(t), "/services", "api"))
		closeOnCleanup(t, p)
		if err := p.Initialized(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Instance(ctx); !errors.Is(err, discovery.ErrNoInstances) {
			t.Fatalf("Instance of no instances: %v, want ErrNoInstances", err)
		}
		r1 := must[*discovery.Registration](t)(discovery.Register(ctx, tg.Connect(t), "/services", inst("i-1", 5)))
		r2 := must[*discovery.Registration](t)(discovery.Register(ctx, tg.Connect(t), "/services", inst("i-2", 6)))
		waitInstances(t, p, "i-1@10.0.0.5:8080", "i-2@10.0.0.6:8080")
		got := p.Instances()[0]
		if string(got.Payload) != `{"zone":"a"}` || got.ServiceType != "DYNAMIC" || got.Name != "api" ||
			!got.RegistrationTimeUTC.Equal(r1.Instance().RegistrationTimeUTC) || got.SSLPort != 0 {
			t.Errorf("decoded %+v, registered %+v", got, r1.Instance())
		}
		if r1.Path() != "/services/api" || r1.Node() != "/services/api/i-1" || r1.ID() != "i-1" || r1.State() != events.StateReady {
			t.Errorf("registration: path %s node %s id %s state %s", r1.Path(), r1.Node(), r1.ID(), r1.State())
		}
		_, err := discovery.Register(ctx, tg.Connect(t), "/services", inst("i-1", 9))
		if !errors.Is(err, discovery.ErrInstanceExists) || !errors.Is(err, group.ErrMemberExists) {
			t.Errorf("Register of an id another session holds: %v, want ErrInstanceExists", err)
		}
		registered := r1.Instance().RegistrationTimeUTC
		u := inst("i-1", 7)
		u.Port, u.SSLPort = 9090, 9443
		if err := r1.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
		waitInstances(t, p, "i-1@10.0.0.7:9090", "i-2@10.0.0.6:8080")
		if got := p.Instances()[0]; got.SSLPort != 9443 || registered.IsZero() || !got.RegistrationTimeUTC.Equal(registered) {
			t.Errorf("after Update: %+v", got)
		}
		names := must[[]string](t)(discovery.Services(ctx, tg.Connect(t), "/services"))
		if !slices.Equal(names, []string{"api"}) {
			t.Errorf("Services %q", names)
		}
		if names, err := discovery.Services(ctx, tg.Connect(t), "/nothing"); err != nil || names == nil || len(names) != 0 {
			t.Errorf("Services of a missing base: %q, %v; want an empty list", names, err)
		}
		if err := r1.Close(); err != nil {
			t.Fatal(err)
		}
		waitInstances(t, p, "i-2@10.0.0.6:8080")
		if err := r1.Update(ctx, u); !errors.Is(err, discovery.ErrClosed) || !errors.Is(err, zkrecipes.ErrClosed) {
			t.Errorf("Update after Close: %v, want ErrClosed", err)
		}
		if err := r1.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := r2.Close(); err != nil {
			t.Fatal(err)
		}
		waitInstances(t, p)
		if _, err := p.Instance(ctx); !errors.Is(err, discovery.ErrNoInstances) {
			t.Errorf("Instance after all left: %v", err)
		}
	})
}

// RoundRobin takes the instances in turn in ID order, Random takes each
// sometimes, Sticky keeps one until it leaves; none reads ZooKeeper.
func TestStrategies(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		var rs []*discovery.Registration
		for i, id := range []string{"i-3", "i-1", "i-2"} {
			rs = append(rs, must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", inst(id, i))))
			closeOnCleanup(t, rs[i])
		}
		pc := &counting{Conn: tg.Connect(t)}
		provider := func(s discovery.Strategy) *discovery.Provider {
			p := must[*discovery.Provider](t)(discovery.NewProvider(pc, "/services", "api", discovery.WithStrategy(s)))
			closeOnCleanup(t, p)
			waitInstances(t, p, "i-1@10.0.0.1:8080", "i-2@10.0.0.2:8080", "i-3@10.0.0.0:8080")
			return p
		}
		pick := func(p *discovery.Provider, n int) []string {
			var s []string
			for range n {
				s = append(s, must[discovery.Instance](t)(p.Instance(ctx)).ID)
			}
			return s
		}
		// picks picks n times, with no read: while nothing changes, the
		// caches of the providers on pc are quiet.
		picks := func(p *discovery.Provider, n int) []string {
			before := pc.n.Load()
			s := pick(p, n)
			if d := pc.n.Load() - before; d != 0 {
				t.Errorf("%d requests for %d picks", d, n)
			}
			return s
		}
		rr := provider(discovery.RoundRobin)
		if got := picks(rr, 6); !slices.Equal(got, []string{"i-1", "i-2", "i-3", "i-1", "i-2", "i-3"}) {
			t.Errorf("RoundRobin: %q", got)
		}
		random := provider(discovery.Random)
		seen := map[string]bool{}
		for _, id := range picks(random, 300) {
			seen[id] = true
		}
		if len(seen) != 3 {
			t.Errorf("Random took %v in 300 picks", seen)
		}
		sticky := provider(discovery.Sticky)
		first := picks(sticky, 1)[0]
		if got := picks(sticky, 5); slices.ContainsFunc(got, func(id string) bool { return id != first }) {
			t.Errorf("Sticky to %s: %q", first, got)
		}
		i := slices.IndexFunc(rs, func(r *discovery.Registration) bool { return r.ID() == first })
		if err := rs[i].Close(); err != nil {
			t.Fatal(err)
		}
		sub := sticky.Subscribe()
		defer sub.Close()
		for slices.ContainsFunc(sticky.Instances(), func(in discovery.Instance) bool { return in.ID == first }) {
			testkit.WaitEvent(t, sub, events.MemberLeft)
		}
		// Uncounted: after the leave, each provider's cache lists the
		// service again (its watch fired), which may come during the picks.
		next := pick(sticky, 4)
		if next[0] == first || slices.ContainsFunc(next, func(id string) bool { return id != next[0] }) {
			t.Errorf("Sticky after %s left: %q", first, next)
		}
	})
}

// counting counts a Conn's reads.
type counting struct {
	zk.Conn
	n atomic.Int32
}

func (c *counting) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	c.n.Add(1)
	return c.Conn.Get(ctx, path)
}

func (c *counting) GetW(ctx context.Context, path string) ([]byte, zk.Stat, <-chan zk.WatchEvent, error) {
	c.n.Add(1)
	return c.Conn.GetW(ctx, path)
}

func (c *counting) Children(ctx context.Context, path string) ([]string, zk.Stat, error) {
	c.n.Add(1)
	return c.Conn.Children(ctx, path)
}

func (c *counting) ChildrenW(ctx context.Context, path string) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	c.n.Add(1)
	return c.Conn.ChildrenW(ctx, path)
}

// A node of the service whose data is not an instance's JSON is left out
// of Instances, and its event says why; the others are served.
func TestBadInstanceData(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		p := must[*discovery.Provider](t)(discovery.NewProvider(tg.Connect(t), "/services", "api"))
		closeOnCleanup(t, p)
		sub := p.Subscribe()
		defer sub.Close()
		r := must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", inst("i-1", 5)))
		closeOnCleanup(t, r)
		if _, err := c.Create(ctx, "/services/api/junk", []byte("not json"), zk.ModeEphemeral); err != nil {
			t.Fatal(err)
		}
		for {
			ev := testkit.WaitEvent(t, sub, events.MemberJoined)
			if ev.Node == "/services/api/junk" {
				if !errors.Is(ev.Err, discovery.ErrBadInstance) || ev.Recipe != "discovery" {
					t.Errorf("the junk's event: recipe %s, err %v; want ErrBadInstance", ev.Recipe, ev.Err)
				}
				break
			}
		}
		waitInstances(t, p, "i-1@10.0.0.5:8080")
		if _, err := c.Set(ctx, "/services/api/junk", must[[]byte](t)(json.Marshal(map[string]any{"name": "api", "id": "junk", "port": 1})), zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		waitInstances(t, p, "i-1@10.0.0.5:8080", "junk@:1")
	})
}

// Bad input is refused before anything is sent.
func TestBadInput(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	c := sim.Connect()
	ctx := ctxT(t)
	ok := inst("i-1", 5)
	with := func(f func(*discovery.Instance)) discovery.Instance { in := ok; f(&in); return in }
	register := func(base string, in discovery.Instance, opts ...discovery.Option) func() error {
		return func() error { _, err := discovery.Register(ctx, c, base, in, opts...); return err }
	}
	provider := func(base, name string, opts ...discovery.Option) func() error {
		return func() error { _, err := discovery.NewProvider(c, base, name, opts...); return err }
	}
	for _, tc := range []struct {
		name string
		err  error
		f    func() error
	}{
		{"relative base", zk.ErrInvalidPath, register("services", ok)},
		{"empty name", discovery.ErrInvalidOption, register("/services", with(func(i *discovery.Instance) { i.Name = "" }))},
		{"empty id", discovery.ErrInvalidOption, register("/services", with(func(i *discovery.Instance) { i.ID = "" }))},
		{"name with a slash", discovery.ErrInvalidOption, register("/services", with(func(i *discovery.Instance) { i.Name = "a/b" }))},
		{"id with a slash", discovery.ErrInvalidOption, register("/services", with(func(i *discovery.Instance) { i.ID = "a/b" }))},
		{"dot id", discovery.ErrInvalidOption, register("/services", with(func(i *discovery.Instance) { i.ID = ".." }))},
		{"payload not JSON", discovery.ErrInvalidOption, register("/services", with(func(i *discovery.Instance) { i.Payload = []byte("{") }))},
		{"port out of range", discovery.ErrInvalidOption, register("/services", with(func(i *discovery.Instance) { i.Port = 70000 }))},
		{"static type", discovery.ErrInvalidOption, register("/services", with(func(i *discovery.Instance) { i.ServiceType = "STATIC" }))},
		{"strategy on Register", discovery.ErrInvalidOption, register("/services", ok, discovery.WithStrategy(discovery.Sticky))},
		{"WithID on Register", discovery.ErrInvalidOption, register("/services", ok, discovery.WithID("x"))},
		{"bad ACL", discovery.ErrInvalidOption, register("/services", ok, discovery.WithACL(zk.ACL{}))},
		{"nil conn", discovery.ErrClosed, func() error { _, err := discovery.Register(ctx, nil, "/services", ok); return err }},
		{"provider relative base", zk.ErrInvalidPath, provider("services", "api")},
		{"provider empty name", discovery.ErrInvalidOption, provider("/services", "")},
		{"provider name with a slash", discovery.ErrInvalidOption, provider("/services", "a/b")},
		{"provider unknown strategy", discovery.ErrInvalidOption, provider("/services", "api", discovery.WithStrategy(7))},
		{"provider WithACL", discovery.ErrInvalidOption, provider("/services", "api", discovery.WithACL(zk.CreatorAll()...))},
		{"provider nil tracer provider", discovery.ErrInvalidOption, provider("/services", "api", discovery.WithTracerProvider(nil))},
		{"services relative base", zk.ErrInvalidPath, func() error { _, err := discovery.Services(ctx, c, "services"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f(); !errors.Is(err, tc.err) {
				t.Errorf("%v, want %v", err, tc.err)
			}
		})
	}
	r := must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", ok))
	closeOnCleanup(t, r)
	for name, in := range map[string]discovery.Instance{
		"Update of another id":   with(func(i *discovery.Instance) { i.ID = "i-2" }),
		"Update of another name": with(func(i *discovery.Instance) { i.Name = "web" }),
		"Update with bad JSON":   with(func(i *discovery.Instance) { i.URISpec = []byte("}") }),
	} {
		if err := r.Update(ctx, in); !errors.Is(err, discovery.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if d, _, _ := c.Get(ctx, r.Node()); !strings.Contains(string(d), `"address":"10.0.0.5"`) {
		t.Errorf("a refused Update was written: %s", d)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if ns, _, _ := c.Children(ctx, "/services/api"); len(ns) != 0 {
		t.Errorf("something was created: %q", ns)
	}
}

// An instance is written as curator-x-discovery 5.4 writes it (these
// bytes are Curator's, from the interop test), read back with every
// field; a payload with another class than Curator's Map, and a uriSpec,
// are kept as they are.
func TestJSON(t *testing.T) {
	const curators = `{"name":"api","id":"j-1","address":"10.0.0.1","port":8081,"sslPort":null,` +
		`"payload":{"@class":"java.util.LinkedHashMap","zone":"b"},"registrationTimeUTC":1795934750668,` +
		`"serviceType":"DYNAMIC","uriSpec":null}`
	ctx := ctxT(t)
	sim := testkit.NewSim()
	defer sim.Close()
	c := sim.Connect()
	want := discovery.Instance{Name: "api", ID: "j-1", Address: "10.0.0.1", Port: 8081, Payload: json.RawMessage(`{"zone":"b"}`),
		RegistrationTimeUTC: time.UnixMilli(1795934750668).UTC(), ServiceType: "DYNAMIC"}
	r := must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", want))
	if d, _, err := c.Get(ctx, r.Node()); err != nil || string(d) != curators {
		t.Errorf("written %s (%v), Curator writes %s", d, err, curators)
	}
	custom := `{"@class":"com.example.Details","zone":"<c>"}`
	uri := `{"parts":[{"value":"scheme","variable":true}]}`
	u := want
	u.Payload, u.URISpec, u.SSLPort, u.Address = json.RawMessage(custom), json.RawMessage(uri), 8443, ""
	if err := r.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	d, _, _ := c.Get(ctx, r.Node())
	for _, part := range []string{`"address":null`, `"sslPort":8443`, `"payload":` + custom, `"uriSpec":` + uri} {
		if !strings.Contains(string(d), part) {
			t.Errorf("written %s: no %s", d, part)
		}
	}
	p := must[*discovery.Provider](t)(discovery.NewProvider(c, "/services", "api"))
	closeOnCleanup(t, p)
	waitInstances(t, p, "j-1@:8081")
	if got := p.Instances()[0]; fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", u) {
		t.Errorf("read %+v\nwrote %+v", got, u)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
