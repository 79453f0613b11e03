package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// inst is an instance of "api" with id id at 10.0.0.<n>:8080, zone a.
func inst(id string, n int) discovery.Instance {
	return discovery.Instance{Name: "api", ID: id, Address: fmt.Sprintf("10.0.0.%d", n), Port: 8080,
		Payload: json.RawMessage(`{"zone":"a"}`)}
}

// ids is "id@address:port" of each instance, in order.
func ids(insts []discovery.Instance) []string {
	var s []string
	for _, in := range insts {
		s = append(s, fmt.Sprintf("%s@%s:%d", in.ID, in.Address, in.Port))
	}
	return s
}

// waitInstances waits, on p's events, until its Instances are want (as
// ids shows them), at most 20 s.
func waitInstances(t *testing.T, p *discovery.Provider, want ...string) {
	t.Helper()
	sub := p.Subscribe()
	defer sub.Close()
	deadline := time.After(20 * time.Second)
	for !slices.Equal(ids(p.Instances()), want) {
		select {
		case _, ok := <-sub.C:
			if !ok {
				t.Fatalf("provider closed; instances %q, want %q", ids(p.Instances()), want)
			}
		case <-deadline:
			t.Fatalf("instances %q, want %q", ids(p.Instances()), want)
		}
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func closeOnCleanup(t *testing.T, h interface{ Close() error }) {
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}
