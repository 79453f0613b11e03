package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recorder keeps every event of a subscription, and checks, as they
// come, what holds of every cache: each path's versions only grow within
// one life of the node (an add after its remove starts a new one), an add
// comes only for a node not there and an update or remove only for one
// there, and INITIALIZED comes once. A path it first hears of in an
// update or remove was added before it subscribed (see held, for a
// recorder that hears everything).
type recorder struct {
	t    *testing.T
	sub  *events.Subscription
	mu   sync.Mutex
	evs  []events.Event
	errs []string
	has  map[string]int32 // path → version, of the nodes there
	gone map[string]bool  // the paths whose last event was a remove
	init int
	done chan struct{}
	wake chan struct{}
}

func record(t *testing.T, h interface {
	Subscribe(...events.SubscribeOption) *events.Subscription
}) *recorder {
	r := &recorder{t: t, sub: h.Subscribe(), has: map[string]int32{}, gone: map[string]bool{}, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	go func() {
		defer close(r.done)
		for ev := range r.sub.C {
			r.mu.Lock()
			r.check(ev)
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
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			t.Error(e)
		}
	})
	return r
}

func (r *recorder) check(ev events.Event) {
	bad := func(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
	v, there := r.has[ev.Node]
	gone := r.gone[ev.Node]
	switch ev.Type {
	case events.NodeAdded:
		if there {
			bad("%s added again (version %d) without a remove", ev.Node, ev.Version)
		}
		r.has[ev.Node] = ev.Version
		delete(r.gone, ev.Node)
	case events.NodeUpdated:
		// A path not seen yet was added before the subscription.
		if gone || (there && ev.Version <= v) {
			bad("%s updated to version %d, had %d (removed: %t)", ev.Node, ev.Version, v, gone)
		}
		r.has[ev.Node] = ev.Version
	case events.NodeRemoved:
		if gone {
			bad("%s removed while not there", ev.Node)
		}
		delete(r.has, ev.Node)
		r.gone[ev.Node] = true
	case events.Initialized:
		r.init++
		if r.init > 1 {
			bad("INITIALIZED %d times", r.init)
		}
	case events.Failed:
		bad("FAILED: %v", ev.Err)
	}
}

// held opens a cache on c while c is cut off, subscribes a recorder to
// it, and lets c back: the recorder hears every event of the cache.
func held[H interface {
	Subscribe(...events.SubscribeOption) *events.Subscription
	Close() error
}](t *testing.T, tg testkit.Target, c zk.Conn, open func(zk.Conn) (H, error)) (H, *recorder) {
	t.Helper()
	tg.Disconnect(t, c)
	h, err := open(c)
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, h)
	rec := record(t, h)
	tg.Reconnect(t, c)
	return h, rec
}

// events returns a copy of what was recorded.
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

// waitEvent waits for an event of type typ on node (any node: "").
func (r *recorder) waitEvent(typ events.Type, node string) events.Event {
	r.t.Helper()
	var got events.Event
	r.waitFor(fmt.Sprintf("%s %s", typ, node), func(evs []events.Event) bool {
		for _, e := range evs {
			if e.Type == typ && (node == "" || e.Node == node) {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

func show(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s %q v%d\n", e.Type, e.Node, e.Data, e.Version)
	}
	return b.String()
}

// changes are the node events among evs, as "TYPE path data vN".
func changes(evs []events.Event) []string {
	var s []string
	for _, e := range evs {
		switch e.Type {
		case events.NodeAdded, events.NodeUpdated, events.NodeRemoved:
			s = append(s, fmt.Sprintf("%s %s %s v%d", e.Type, e.Node, e.Data, e.Version))
		}
	}
	return s
}

// fresh reads the tree at path from the server, depth levels deep: path
// → data and version. A missing path is an empty tree.
func fresh(ctx context.Context, t *testing.T, c zk.Conn, path string, depth int) map[string]string {
	t.Helper()
	got := map[string]string{}
	var walk func(p string, d int)
	walk = func(p string, d int) {
		data, st, err := c.Get(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got[p] = fmt.Sprintf("%s v%d", data, st.Version)
		if d == depth {
			return
		}
		kids, _, err := c.Children(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			walk(zk.Join(p, k), d+1)
		}
	}
	walk(path, 0)
	return got
}

// treeOf is what tc shows, in fresh's form.
func treeOf(tc *cache.TreeCache) map[string]string {
	got := map[string]string{}
	tc.Walk(func(n cache.Node) bool {
		got[n.Path] = fmt.Sprintf("%s v%d", n.Data, n.Stat.Version)
		return true
	})
	return got
}

// settle waits, at most 20 s, until shown() equals a fresh read of the
// server; the server is not written meanwhile.
func settle(t *testing.T, what string, want, shown func() map[string]string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	w := want()
	for {
		got := shown()
		if mapsEqual(got, w) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not settle on the server's tree:\n got %v\nwant %v", what, got, w)
		}
		waitAny(t)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// waitAny waits a millisecond, on a timer: the polling step.
func waitAny(t *testing.T) {
	t.Helper()
	select {
	case <-time.After(time.Millisecond):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
}

// counting is a Conn that counts the reads made on it.
type counting struct {
	zk.Conn
	gets, lists, exists atomic.Int64
}

func (c *counting) GetW(ctx context.Context, p string) ([]byte, zk.Stat, <-chan zk.WatchEvent, error) {
	c.gets.Add(1)
	return c.Conn.GetW(ctx, p)
}

func (c *counting) ChildrenW(ctx context.Context, p string) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	c.lists.Add(1)
	return c.Conn.ChildrenW(ctx, p)
}

func (c *counting) ExistsW(ctx context.Context, p string) (zk.Stat, bool, <-chan zk.WatchEvent, error) {
	c.exists.Add(1)
	return c.Conn.ExistsW(ctx, p)
}

func (c *counting) reads() int64 { return c.gets.Load() + c.lists.Load() + c.exists.Load() }

// mk creates path with data, and its missing parents (persistent,
// empty).
func mk(ctx context.Context, t *testing.T, c zk.Conn, path, data string) {
	t.Helper()
	if err := mkAll(ctx, c, zk.Parent(path)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, path, []byte(data), zk.ModePersistent); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
}

func mkAll(ctx context.Context, c zk.Conn, path string) error {
	if path == "/" {
		return nil
	}
	if err := mkAll(ctx, c, zk.Parent(path)); err != nil {
		return err
	}
	if _, err := c.Create(ctx, path, nil, zk.ModePersistent); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return nil
}

func set(ctx context.Context, t *testing.T, c zk.Conn, path, data string) {
	t.Helper()
	if _, err := c.Set(ctx, path, []byte(data), zk.AnyVersion); err != nil {
		t.Fatalf("set %s: %v", path, err)
	}
}

func del(ctx context.Context, t *testing.T, c zk.Conn, path string) {
	t.Helper()
	if err := c.Delete(ctx, path, zk.AnyVersion); err != nil {
		t.Fatalf("delete %s: %v", path, err)
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
			t.Errorf("Close: %v", err)
		}
	})
}
