package interop

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// instancesSpec is a provider's instances as CuratorDiscovery's await
// prints them: "id@address:port<payload>" joined by ";", "-" for none.
func instancesSpec(insts []discovery.Instance) string {
	var s []string
	for _, in := range insts {
		s = append(s, fmt.Sprintf("%s@%s:%d%s", in.ID, in.Address, in.Port, in.Payload))
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ";")
}

// Curator's ServiceDiscovery and ours in one service, both ways: each
// sees the other's instance register, update and deregister (Curator's
// ServiceCache, our Provider), with every field as the other wrote it;
// an instance Curator wrote, registered again by us, is the same bytes;
// both list the service's name, and say what they do with a missing base.
func TestDiscoveryWithCurator(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	cur := startJava(t, t0, "curator", "CuratorDiscovery.java", srv.Addr(), "/services", "api")

	p, err := discovery.NewProvider(connect(t, srv.Addr()), "/services", "api")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	sub := p.Subscribe()
	defer sub.Close()
	waitSpec := func(want string) []discovery.Instance {
		t.Helper()
		deadline := time.After(step)
		for instancesSpec(p.Instances()) != want {
			select {
			case <-sub.C:
			case <-deadline:
				t.Fatalf("our Provider shows %s, want %s", instancesSpec(p.Instances()), want)
			}
		}
		return p.Instances()
	}

	// Curator registers: we decode every field it wrote.
	written := cur.ask(`register j-1 10.0.0.1 8081 {"zone":"b"}`, "REGISTERED")
	var raw map[string]any
	if err := json.Unmarshal([]byte(written), &raw); err != nil {
		t.Fatal(err)
	}
	j := waitSpec(`j-1@10.0.0.1:8081{"zone":"b"}`)[0]
	if ms := raw["registrationTimeUTC"].(float64); j.Name != "api" || j.SSLPort != 0 || j.ServiceType != "DYNAMIC" ||
		j.URISpec != nil || j.RegistrationTimeUTC.UnixMilli() != int64(ms) {
		t.Errorf("Curator's instance %s decoded as %+v", written, j)
	}

	// We register: Curator decodes every field we wrote.
	c := connect(t, srv.Addr())
	r, err := discovery.Register(ctx, c, "/services", discovery.Instance{Name: "api", ID: "go-1", Address: "10.0.0.5",
		Port: 8080, Payload: json.RawMessage(`{"zone":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cur.ask(`await go-1@10.0.0.5:8080{"zone":"a"};j-1@10.0.0.1:8081{"zone":"b"} 10000`, "MATCH")
	var seen []map[string]any
	if err := json.Unmarshal([]byte(cur.ask("instances", "INSTANCES")), &seen); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "api", "id": "go-1", "address": "10.0.0.5", "port": 8080.0, "sslPort": nil,
		"payload": map[string]any{"zone": "a"}, "registrationTimeUTC": float64(r.Instance().RegistrationTimeUTC.UnixMilli()),
		"serviceType": "DYNAMIC"}
	if got := seen[0]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Curator read our instance as %v, want %v", got, want)
	}
	d, _, err := c.Get(ctx, "/services/api/go-1")
	if err != nil {
		t.Fatal(err)
	}
	if keys, curKeys := jsonKeys(t, d), jsonKeys(t, []byte(written)); !slices.Equal(keys, curKeys) {
		t.Errorf("our JSON's fields %q, Curator's %q:\n%s\n%s", keys, curKeys, d, written)
	}

	// Updates, both ways.
	u := r.Instance()
	u.Port = 9090
	if err := r.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	cur.ask(`await go-1@10.0.0.5:9090{"zone":"a"};j-1@10.0.0.1:8081{"zone":"b"} 10000`, "MATCH")
	written = cur.ask("update 10.0.0.2 8082", "UPDATED")
	j = waitSpec(`go-1@10.0.0.5:9090{"zone":"a"};j-1@10.0.0.2:8082{"zone":"b"}`)[1]

	// Names: ours and Curator's; a missing base.
	names, err := discovery.Services(ctx, c, "/services")
	if err != nil || !slices.Equal(names, []string{"api"}) {
		t.Errorf("Services: %q, %v", names, err)
	}
	if got := cur.ask("names /services", "NAMES"); got != "api" {
		t.Errorf("Curator's queryForNames: %q, want api", got)
	}
	if names, err := discovery.Services(ctx, c, "/nothing"); err != nil || len(names) != 0 {
		t.Errorf("Services of a missing base: %q, %v; want none", names, err)
	}
	cur.ask("names /nothing", "NONODE")

	// Deregistrations, both ways.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	cur.ask(`await j-1@10.0.0.2:8082{"zone":"b"} 10000`, "MATCH")
	cur.ask("unregister", "UNREGISTERED")
	waitSpec("-")

	// What Curator wrote, registered by us, is the same bytes.
	again, err := discovery.Register(ctx, c, "/services", j)
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := c.Get(ctx, "/services/api/j-1"); err != nil || string(d) != written {
		t.Errorf("Curator's instance registered by us: %s (%v), Curator wrote %s", d, err, written)
	}
	cur.ask(`await j-1@10.0.0.2:8082{"zone":"b"} 10000`, "MATCH")
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	cur.ask("await - 10000", "MATCH")
	if kids, _, err := c.Children(ctx, "/services/api"); err != nil && !errors.Is(err, zk.ErrNoNode) || len(kids) > 0 {
		t.Errorf("left in the service: %q (%v)", kids, err)
	}
}

// jsonKeys is a JSON object's member names, in order.
func jsonKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var keys []string
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}
