package group_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recorder keeps every event of a subscription.
type recorder struct {
	t    *testing.T
	sub  *events.Subscription
	mu   sync.Mutex
	evs  []events.Event
	done chan struct{}
	wake chan struct{}
}

func record(t *testing.T, h interface {
	Subscribe(...events.SubscribeOption) *events.Subscription
}) *recorder {
	r := &recorder{t: t, sub: h.Subscribe(), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	go func() {
		defer close(r.done)
		for ev := range r.sub.C {
			r.mu.Lock()
			r.evs = append(r.evs, ev)
			r.mu.Unlock()
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		r.sub.Close()
		<-r.done
	})
	return r
}

func (r *recorder) events() []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// waitFor waits, at most 20 s, until cond holds of the events so far.
func (r *recorder) waitFor(what string, cond func([]events.Event) bool) []events.Event {
	r.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		evs := r.events()
		if cond(evs) {
			return evs
		}
		select {
		case <-r.wake:
		case <-deadline:
			r.t.Fatalf("no %s within 20 s; events:\n%s", what, show(evs))
		}
	}
}

// waitN waits for the n-th event of type typ on node and returns it.
func (r *recorder) waitN(n int, typ events.Type, node string) events.Event {
	r.t.Helper()
	var got events.Event
	r.waitFor(fmt.Sprintf("%d× %s %s", n, typ, node), func(evs []events.Event) bool {
		k := 0
		for _, e := range evs {
			if e.Type == typ && (node == "" || e.Node == node) {
				if k++; k == n {
					got = e
					return true
				}
			}
		}
		return false
	})
	return got
}

// count is how many events of type typ were recorded.
func (r *recorder) count(typ events.Type) int {
	n := 0
	for _, e := range r.events() {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// memberLog is the member events, as "TYPE node data".
func memberLog(evs []events.Event) []string {
	var s []string
	for _, e := range evs {
		switch e.Type {
		case events.MemberJoined, events.MemberUpdated, events.MemberLeft:
			s = append(s, fmt.Sprintf("%s %s %s", e.Type, e.Node, e.Data))
		}
	}
	return s
}

func show(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s %q v%d err=%v\n", e.Type, e.Node, e.Data, e.Version, e.Err)
	}
	return b.String()
}

// node reads path's data and owner.
func node(ctx context.Context, t *testing.T, c zk.Conn, path string) (string, int64, bool) {
	t.Helper()
	d, st, err := c.Get(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return "", 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(d), st.EphemeralOwner, true
}

// kids lists path's children ("absent" when path is not there).
func kids(ctx context.Context, t *testing.T, c zk.Conn, path string) []string {
	t.Helper()
	ns, _, err := c.Children(ctx, path)
	if err != nil {
		return []string{"absent"}
	}
	slices.Sort(ns)
	return ns
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
