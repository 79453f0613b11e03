package cache_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// gated is a Conn whose GetW calls wait until want of them are in flight
// at once (or 10 s pass), and that records the most in flight.
type gated struct {
	zk.Conn
	want     int
	mu       sync.Mutex
	now, max int
	opened   bool
	timedOut int // the most in flight when the wait timed out (0: it did not)
	open     chan struct{}
}

func (g *gated) GetW(ctx context.Context, p string) ([]byte, zk.Stat, <-chan zk.WatchEvent, error) {
	if !strings.HasPrefix(p, "/big/") { // the root's read comes first, alone
		return g.Conn.GetW(ctx, p)
	}
	g.mu.Lock()
	g.now++
	g.max = max(g.max, g.now)
	if g.now == g.want && !g.opened {
		g.opened = true
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-time.After(10 * time.Second): // not pipelined: let every read go, and fail
		g.mu.Lock()
		if !g.opened {
			g.opened, g.timedOut = true, g.max
			close(g.open)
		}
		g.mu.Unlock()
	}
	defer func() { g.mu.Lock(); g.now--; g.mu.Unlock() }()
	return g.Conn.GetW(ctx, p)
}

// The first load is pipelined: 100 reads of 400 children are in flight at
// once (a load one round trip at a time would have one), and never more
// than the bound, 256.
func TestFirstLoadIsPipelined(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	ctx := ctxT(t)
	w := sim.Connect()
	for i := range 400 {
		mk(ctx, t, w, fmt.Sprintf("/big/n%03d", i), "x")
	}
	g := &gated{Conn: sim.Connect(), want: 100, open: make(chan struct{})}
	tc := must[*cache.TreeCache](t)(cache.NewTree(g, "/big"))
	closeOnCleanup(t, tc)
	if err := tc.Initialized(ctx); err != nil {
		t.Fatal(err)
	}
	if g.timedOut != 0 {
		t.Fatalf("at most %d reads in flight at once, want 100", g.timedOut)
	}
	if g.max > 256 {
		t.Errorf("%d reads in flight, over the bound of 256", g.max)
	}
	if n := len(treeOf(tc)); n != 401 {
		t.Errorf("%d nodes cached, want 401", n)
	}
}

// A subscriber who subscribes after the first load gets START and then
// INITIALIZED at once.
func TestLateSubscriberGetsInitialized(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		mk(ctx, t, tg.Connect(t), "/late/a", "x")
		cc := must[*cache.ChildrenCache](t)(cache.NewChildren(tg.Connect(t), "/late"))
		closeOnCleanup(t, cc)
		if err := cc.Initialized(ctx); err != nil {
			t.Fatal(err)
		}
		sub := cc.Subscribe()
		defer sub.Close()
		for _, want := range []events.Type{events.Start, events.Initialized} {
			select {
			case ev := <-sub.C:
				if ev.Type != want {
					t.Fatalf("event %s, want %s", ev.Type, want)
				}
			case <-ctx.Done():
				t.Fatalf("no %s", want)
			}
		}
	})
}
