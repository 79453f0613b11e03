package cache_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A node cache of a node that is not there is initialized empty and
// waits for it; then it follows the node's sets and its deletion, each
// event with the path, data and version of that change.
func TestNodeCache(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		w := tg.Connect(t)
		const path = "/app/config/flags"
		nc := must[*cache.NodeCache](t)(cache.NewNode(tg.Connect(t), path))
		closeOnCleanup(t, nc)
		rec := record(t, nc)
		if err := nc.Initialized(ctx); err != nil {
			t.Fatal(err)
		}
		if n, ok := nc.Get(); ok {
			t.Fatalf("Get of a missing node = %+v, true", n)
		}
		if nc.State() != events.StateReady {
			t.Errorf("state %s after Initialized, want READY", nc.State())
		}
		mk(ctx, t, w, path, "a")
		rec.waitEvent(events.NodeAdded, path)
		set(ctx, t, w, path, "b")
		ev := rec.waitEvent(events.NodeUpdated, path)
		if string(ev.Data) != "b" || ev.Version != 1 || ev.Path != path || ev.Recipe != "cache" {
			t.Errorf("update event %+v", ev)
		}
		if n, ok := nc.Get(); !ok || string(n.Data) != "b" || n.Stat.Version != 1 || n.Path != path {
			t.Errorf("Get after the update event = %+v, %t", n, ok)
		}
		del(ctx, t, w, path)
		rec.waitEvent(events.NodeRemoved, path)
		if _, ok := nc.Get(); ok {
			t.Error("Get after the remove event: still there")
		}
		mk(ctx, t, w, path, "c")
		rec.waitFor("the node back", func(evs []events.Event) bool { return len(changes(evs)) == 4 })
		want := []string{"NODE_ADDED " + path + " a v0", "NODE_UPDATED " + path + " b v1", "NODE_REMOVED " + path + " b v1", "NODE_ADDED " + path + " c v0"}
		if got := changes(rec.events()); !slices.Equal(got, want) {
			t.Errorf("changes %q, want %q", got, want)
		}
		if evs := rec.events(); evs[0].Type != events.Start || evs[1].Type != events.Initialized {
			t.Errorf("first events %s, %s; want START, INITIALIZED", evs[0].Type, evs[1].Type)
		}
	})
}

// A children cache publishes the children, with their data, not the
// node itself; a child's own children are not followed.
func TestChildrenCache(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		w := tg.Connect(t)
		const path = "/app/workers"
		mk(ctx, t, w, path+"/w1", "one")
		mk(ctx, t, w, path+"/w2", "two")
		cc := must[*cache.ChildrenCache](t)(cache.NewChildren(tg.Connect(t), path, cache.WithData(true)))
		closeOnCleanup(t, cc)
		rec := record(t, cc)
		if err := cc.Initialized(ctx); err != nil {
			t.Fatal(err)
		}
		kids := cc.Children()
		if len(kids) != 2 || string(kids["w1"].Data) != "one" || kids["w2"].Path != path+"/w2" {
			t.Fatalf("Children = %+v", kids)
		}
		mk(ctx, t, w, path+"/w1/sub", "deeper")
		mk(ctx, t, w, path+"/w3", "three")
		rec.waitEvent(events.NodeAdded, path+"/w3")
		del(ctx, t, w, path+"/w2")
		rec.waitEvent(events.NodeRemoved, path+"/w2")
		for _, c := range changes(rec.events()) {
			if c == "NODE_ADDED "+path+" v0" || slices.Contains([]string{"NODE_ADDED " + path + "/w1/sub deeper v0"}, c) {
				t.Errorf("published %s", c)
			}
		}
		if kids := cc.Children(); len(kids) != 2 || kids["w3"].Stat.Version != 0 {
			t.Errorf("Children = %+v", kids)
		}
	})
}

// A tree cache follows its subtree to WithMaxDepth (the path is level 0),
// Walk visits a parent before its children, and at once after INITIALIZED
// it equals the server's tree.
func TestTreeCache(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		w := tg.Connect(t)
		const path = "/app/services"
		for _, p := range []string{"/api/i-1", "/api/i-2", "/web/i-1", "/api/i-1/deep"} {
			mk(ctx, t, w, path+p, p)
		}
		for depth, want := range map[int]int{0: 1, 1: 3, 2: 6, 3: 7} {
			tc := must[*cache.TreeCache](t)(cache.NewTree(tg.Connect(t), path, cache.WithMaxDepth(depth)))
			closeOnCleanup(t, tc)
			if err := tc.Initialized(ctx); err != nil {
				t.Fatal(err)
			}
			got := treeOf(tc)
			if len(got) != want || !mapsEqual(got, fresh(ctx, t, w, path, depth)) {
				t.Errorf("depth %d: %v, want %d nodes", depth, got, want)
			}
		}
		tc := must[*cache.TreeCache](t)(cache.NewTree(tg.Connect(t), path))
		closeOnCleanup(t, tc)
		if err := tc.Initialized(ctx); err != nil {
			t.Fatal(err)
		}
		var order []string
		tc.Walk(func(n cache.Node) bool { order = append(order, n.Path); return true })
		want := []string{path, path + "/api", path + "/api/i-1", path + "/api/i-1/deep", path + "/api/i-2", path + "/web", path + "/web/i-1"}
		if !slices.Equal(order, want) {
			t.Errorf("Walk order %v, want %v", order, want)
		}
		n := 0
		tc.Walk(func(cache.Node) bool { n++; return n < 2 })
		if n != 2 {
			t.Errorf("Walk went on after false: %d calls", n)
		}
		if nd, ok := tc.Get(path + "/api/i-1"); !ok || string(nd.Data) != "/api/i-1" {
			t.Errorf("Get = %+v, %t", nd, ok)
		}
	})
}

// Bad input is refused before anything is sent.
func TestBadInput(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	conn := sim.Connect()
	closed := sim.Connect()
	closed.Close()
	for _, c := range []struct {
		name string
		err  error
		open func() error
	}{
		{"relative path", zk.ErrInvalidPath, func() error { _, err := cache.NewTree(conn, "app/x"); return err }},
		{"relative node path", zkrecipes.ErrInvalidPath, func() error { _, err := cache.NewNode(conn, "x"); return err }},
		{"trailing slash", zk.ErrInvalidPath, func() error { _, err := cache.NewChildren(conn, "/app/"); return err }},
		{"negative depth", cache.ErrInvalidOption, func() error { _, err := cache.NewTree(conn, "/a", cache.WithMaxDepth(-1)); return err }},
		{"depth on a node cache", cache.ErrInvalidOption, func() error { _, err := cache.NewNode(conn, "/a", cache.WithMaxDepth(1)); return err }},
		{"depth on a children cache", cache.ErrInvalidOption, func() error { _, err := cache.NewChildren(conn, "/a", cache.WithMaxDepth(1)); return err }},
		{"zero close timeout", zkrecipes.ErrInvalidOption, func() error { _, err := cache.NewTree(conn, "/a", cache.WithCloseTimeout(0)); return err }},
		{"nil tracer provider", cache.ErrInvalidOption, func() error { _, err := cache.NewTree(conn, "/a", cache.WithTracerProvider(nil)); return err }},
		{"nil connection", cache.ErrClosed, func() error { _, err := cache.NewTree(nil, "/a"); return err }},
		{"closed connection", zkrecipes.ErrClosed, func() error { _, err := cache.NewNode(closed, "/a"); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.open(); !errors.Is(err, c.err) {
				t.Errorf("err = %v, want %v", err, c.err)
			}
		})
	}
}
