package cache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Four writers make random creates, sets and deletes in a tree of depth 3
// under /p while the connections of a tree cache (/p), a children cache
// (/p/a0) and a node cache (/p/a0/b0) drop and come back, and each of
// their sessions expires once. After the writers stop, each cache
// settles on a fresh read of the server, and what its events say (adds,
// updates, removes replayed) is what it shows; along the way every path's
// versions only grew within a life of the node and INITIALIZED came once
// (the recorder checks them as they come).
func TestPropertyCachesFollowRandomWrites(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		const writers, opsEach = 4, 2500 // 10,000 writes, as issue 37 asks
		w := tg.Connect(t)
		mk(ctx, t, w, "/p/a0/b0", "0")

		conns := []zk.Conn{tg.Connect(t), tg.Connect(t), tg.Connect(t)}
		tc, trec := held(t, tg, conns[0], func(c zk.Conn) (*cache.TreeCache, error) { return cache.NewTree(c, "/p") })
		cc, crec := held(t, tg, conns[1], func(c zk.Conn) (*cache.ChildrenCache, error) { return cache.NewChildren(c, "/p/a0") })
		nc, nrec := held(t, tg, conns[2], func(c zk.Conn) (*cache.NodeCache, error) { return cache.NewNode(c, "/p/a0/b0") })
		recs := []*recorder{trec, crec, nrec}

		var ops atomic.Int64
		var wg sync.WaitGroup
		for i := range writers {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			c := tg.Connect(t)
			wg.Go(func() { write(ctx, c, rng, opsEach, &ops) })
		}
		// Faults, in turn on each cache's connection, while the writers
		// write: a cut of some writes' length, then a reconnect, or, the
		// second time round, an expiry.
		waitOps := func(n int64) {
			for target := ops.Load() + n; ops.Load() < target && ops.Load() < writers*opsEach; {
				waitAny(t)
			}
		}
		for r := range 6 {
			c := conns[r%3]
			waitOps(100)
			tg.Disconnect(t, c)
			waitOps(100)
			if r >= 3 {
				tg.Expire(t, c)
			} else {
				tg.Reconnect(t, c)
			}
		}
		wg.Wait()
		t.Logf("%d writes", ops.Load())

		settle(t, "the tree cache", func() map[string]string { return fresh(ctx, t, w, "/p", 10) },
			func() map[string]string { return treeOf(tc) })
		settle(t, "the children cache", func() map[string]string {
			m := fresh(ctx, t, w, "/p/a0", 1)
			delete(m, "/p/a0")
			return m
		}, func() map[string]string {
			m := map[string]string{}
			for _, n := range cc.Children() {
				m[n.Path] = fmt.Sprintf("%s v%d", n.Data, n.Stat.Version)
			}
			return m
		})
		settle(t, "the node cache", func() map[string]string { return fresh(ctx, t, w, "/p/a0/b0", 0) },
			func() map[string]string {
				m := map[string]string{}
				if n, ok := nc.Get(); ok {
					m[n.Path] = fmt.Sprintf("%s v%d", n.Data, n.Stat.Version)
				}
				return m
			})
		// What the events say is what the caches show.
		shown := []func() map[string]int32{
			func() map[string]int32 {
				m := map[string]int32{}
				tc.Walk(func(n cache.Node) bool { m[n.Path] = n.Stat.Version; return true })
				return m
			},
			func() map[string]int32 {
				m := map[string]int32{}
				for _, n := range cc.Children() {
					m[n.Path] = n.Stat.Version
				}
				return m
			},
			func() map[string]int32 {
				m := map[string]int32{}
				if n, ok := nc.Get(); ok {
					m[n.Path] = n.Stat.Version
				}
				return m
			},
		}
		for i, r := range recs {
			want := shown[i]()
			r.waitFor("events replaying to the cache", func(evs []events.Event) bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				if len(r.has) != len(want) {
					return false
				}
				for p, v := range want {
					if got, ok := r.has[p]; !ok || got != v {
						return false
					}
				}
				return true
			})
			if r.init != 1 {
				t.Errorf("cache %d: %d INITIALIZED", i, r.init)
			}
		}
		if t.Failed() {
			t.Logf("seed %d", seed)
		}
	})
}

// write makes n random writes in the tree of depth 3 under /p: names
// a0..a2, b0..b2, c0..c2 at the three levels; a create whose parent is
// missing, or a delete of a node with children, fails and counts too.
func write(ctx context.Context, c zk.Conn, rng *rand.Rand, n int, ops *atomic.Int64) {
	for range n {
		p := "/p"
		for d, l := range "abc" {
			p = fmt.Sprintf("%s/%c%d", p, l, rng.IntN(3))
			if rng.IntN(3) == 0 || d == 2 {
				break
			}
		}
		data := []byte(fmt.Sprint(rng.IntN(1000)))
		switch rng.IntN(3) {
		case 0:
			_, _ = c.Create(ctx, p, data, zk.ModePersistent)
		case 1:
			_, _ = c.Set(ctx, p, data, zk.AnyVersion)
		case 2:
			_ = c.Delete(ctx, p, zk.AnyVersion)
		}
		ops.Add(1)
		if ctx.Err() != nil {
			return
		}
	}
}
