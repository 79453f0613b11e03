package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// cacheBench is the peers' TreeCacheBench (Curator's TreeCache,
// treecachebench.py: kazoo's): a tree of depth 3 under a fresh root,
// -nodes nodes below it (fanout f = round(cbrt(nodes)): f level-1 nodes,
// f² level-2 nodes, the rest leaves spread round-robin over level 2),
// -data-bytes each, created level by level, -batch creates in flight.
// After -warmup-loads unmeasured loads (each on its own session), on a
// fresh session: load_ms is NewTree → Initialized; change_us times
// -changes sets of random leaves from the writer's session, each to the
// cache's NODE_UPDATED carrying the new data; raw_change_us times as many
// raw sets to a plain data watch's event on another session, in the same
// run. load_requests is the server's zk_packets_received delta over the
// load (mntr on the first server; pings included), requests_per_node that
// over the cached nodes (nodes + the root).
//
// Beyond the peers' fields, two floors from the same run: raw_load_ms
// makes the cache's reads by hand (a get with a data watch of every node,
// a listing with a child watch of every node above -max-depth, level by
// level, as many in flight as the cache has at most), and
// raw_change_get_us times a raw set to its watch event and then the get
// that reads the new data (a watch says that a node changed, not to what:
// the least a cache that shows the new data can take). Then the cache's
// live heap, goroutine stacks and
// goroutines over the cached nodes (after a GC, with the cache loaded,
// minus before it), and with -members M the same for group.Watch of a
// group of M members (ephemeral nodes <dir>/<id> with -data-bytes each,
// the layout group.Join makes).
func cacheBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("cache")
	nodes := c.fs.Int("nodes", 10000, "nodes below the root (depth 3)")
	size := c.fs.Int("data-bytes", 100, "data of every node")
	changes := c.fs.Int("changes", 200, "sets of random leaves timed to the cache's NODE_UPDATED, and as many raw sets")
	batch := c.fs.Int("batch", 1000, "creates in flight while preparing")
	warmups := c.fs.Int("warmup-loads", 1, "unmeasured loads first, each on its own session")
	maxDepth := c.fs.Int("max-depth", 3, "cache.WithMaxDepth (the root is 0; negative: no limit)")
	seed := c.fs.Uint64("seed", 1, "leaf choice")
	members := c.fs.Int("members", 0, "also measure group.Watch of a group of this many members (0: not)")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	switch {
	case *nodes < 1:
		return nil, errors.New("-nodes must be at least 1")
	case *size < 0 || *changes < 0 || *warmups < 0 || *members < 0:
		return nil, errors.New("-data-bytes, -changes, -warmup-loads and -members must not be negative")
	case *batch < 1:
		return nil, errors.New("-batch must be at least 1")
	}
	var opts []cache.Option
	if *maxDepth >= 0 {
		opts = append(opts, cache.WithMaxDepth(*maxDepth))
	}
	tg := c.target()
	writer, err := tg.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer writer.Close()
	root := c.path + "/tree"
	levels := treeLayout(root, *nodes)
	p0 := time.Now()
	if err := createParents(ctx, writer, root); err != nil {
		return nil, err
	}
	if _, err := writer.Set(ctx, root, nodeData(*size, root), zk.AnyVersion); err != nil {
		return nil, err
	}
	for _, l := range levels {
		if err := createAll(ctx, writer, l, *size, *batch, zk.ModePersistent); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	prepare := time.Since(p0)

	errs := []string{}
	for range *warmups {
		if err := loadOnce(ctx, tg, root, opts); err != nil {
			return nil, fmt.Errorf("warm-up load: %w", err)
		}
	}

	cc, err := tg.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	packets := c.packetsReceived
	if tg.sim != nil {
		packets = func(context.Context) (int64, error) { return 0, errors.New("the simulator has no mntr") }
	}
	m0 := measure()
	pk0, pkErr := packets(ctx)
	t0 := time.Now()
	tc, err := cache.NewTree(cc, root, opts...)
	if err != nil {
		return nil, err
	}
	defer tc.Close()
	lctx, cancel := context.WithTimeout(ctx, 300*time.Second)
	err = tc.Initialized(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	load := time.Since(t0)
	pk1, pkErr1 := packets(ctx)
	m1 := measure()
	cached := 0
	tc.Walk(func(cache.Node) bool { cached++; return true })
	if cached != *nodes+1 {
		errs = append(errs, fmt.Sprintf("cache holds %d nodes after INITIALIZED, want %d", cached, *nodes+1))
	}
	var loadReqs, perNode any
	if err := errors.Join(pkErr, pkErr1); err == nil {
		loadReqs, perNode = pk1-pk0, round(float64(pk1-pk0)/float64(*nodes+1), 2)
	} else if tg.sim == nil {
		fmt.Fprintf(os.Stderr, "zkbench cache: mntr: %v\n", err)
	}

	// The same reads by hand, the same bound in flight, no cache: what
	// this client and server take for them in this run.
	rawLoad, rawRead, err := rawTreeLoad(ctx, tg, root, *maxDepth)
	if err != nil {
		errs = append(errs, fmt.Sprintf("raw load: %v", err))
	} else if rawRead != *nodes+1 {
		errs = append(errs, fmt.Sprintf("raw load read %d nodes, want %d", rawRead, *nodes+1))
	}

	leaves := levels[2]
	if len(leaves) == 0 {
		leaves = levels[1]
	}
	if len(leaves) == 0 {
		leaves = levels[0]
	}
	rnd := rand.New(rand.NewPCG(*seed, 0))
	sub := tc.Subscribe()
	change, err := cacheChanges(ctx, writer, sub, leaves, rnd, *changes, *size)
	sub.Close()
	if err != nil {
		errs = append(errs, err.Error())
	}
	raw, rawGet, err := rawChanges(ctx, tg, writer, leaves, rnd, *changes, *size)
	if err != nil {
		errs = append(errs, err.Error())
	}
	tc.Close()

	var grp obj
	if *members > 0 {
		if grp, err = groupCost(ctx, tg, writer, c.path+"/group", *members, *size, *batch); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for i := len(levels) - 1; i >= 0; i-- { // as the peers do: many deletes in flight
		if err := deleteAll(ctx, writer, levels[i], *batch); err != nil {
			fmt.Fprintf(os.Stderr, "zkbench cache: cleanup: %v\n", err)
		}
	}
	if err := deleteTree(ctx, writer, c.path); err != nil {
		fmt.Fprintf(os.Stderr, "zkbench cache: cleanup %s: %v\n", c.path, err)
	}

	ratio := func(a, b []time.Duration) any {
		if len(a) == 0 || len(b) == 0 {
			return nil
		}
		return round(float64(median(a))/float64(median(b)), 2)
	}
	params := obj{{"nodes", *nodes}, {"data_bytes", *size}, {"changes", *changes}, {"batch", *batch},
		{"warmup_loads", *warmups}, {"max_depth", *maxDepth}, {"seed", *seed}, {"members", *members},
		{"session_ms", c.session.Milliseconds()}, {"path", c.path}}
	out := append(c.header("treecache", params),
		field{"cache", "treecache"}, field{"nodes", *nodes},
		field{"prepare_ms", round(float64(prepare)/float64(time.Millisecond), 1)},
		field{"shape", []int{len(levels[0]), len(levels[1]), len(levels[2])}}, field{"max_depth", *maxDepth},
		field{"load_ms", round(float64(load)/float64(time.Millisecond), 1)}, field{"cached_nodes", cached},
		field{"load_requests", loadReqs}, field{"requests_per_node", perNode},
		field{"raw_load_ms", round(float64(rawLoad)/float64(time.Millisecond), 1)},
		field{"load_per_raw_load", ratio([]time.Duration{load}, []time.Duration{rawLoad})},
		field{"change_us", summary(change, micros)}, field{"raw_change_us", summary(raw, micros)},
		field{"raw_change_get_us", summary(rawGet, micros)},
		field{"change_p50_per_raw_change_p50", ratio(change, raw)},
		field{"change_p50_per_raw_change_get_p50", ratio(change, rawGet)})
	out = append(out, m1.per(m0, cached, "node")...)
	out = append(out, grp...)
	return append(out, field{"errors", errs}, field{"ok", len(errs) == 0}), nil
}

// treeLayout is the peers' tree under root: the paths of level 1, level 2
// and the leaves.
func treeLayout(root string, n int) [3][]string {
	f := max(1, int(math.Round(math.Cbrt(float64(n)))))
	var l [3][]string
	for i := 0; i < f && len(l[0]) < n; i++ {
		l[0] = append(l[0], fmt.Sprintf("%s/a%d", root, i))
	}
	for i := 0; i < f*f && len(l[0])+len(l[1]) < n; i++ {
		l[1] = append(l[1], fmt.Sprintf("%s/b%d", l[0][i%len(l[0])], i))
	}
	for i := range n - len(l[0]) - len(l[1]) {
		l[2] = append(l[2], fmt.Sprintf("%s/c%d", l[1][i%len(l[1])], i))
	}
	return l
}

// nodeData is size bytes: tag, then x (the peers' data).
func nodeData(size int, tag string) []byte {
	b := bytes.Repeat([]byte{'x'}, size)
	copy(b, tag)
	return b
}

// createAll creates paths (their parents exist) with nodeData, window
// creates in flight.
func createAll(ctx context.Context, conn zk.Conn, paths []string, size, window int, mode zk.CreateMode) error {
	return inFlight(ctx, paths, window, func(ctx context.Context, p string) error {
		_, err := conn.Create(ctx, p, nodeData(size, p), mode)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	})
}

// deleteAll deletes paths (their children are gone), window deletes in
// flight.
func deleteAll(ctx context.Context, conn zk.Conn, paths []string, window int) error {
	return inFlight(ctx, paths, window, func(ctx context.Context, p string) error {
		err := conn.Delete(ctx, p, zk.AnyVersion)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
}

// inFlight calls do for each path, window calls at once, and returns the
// first error (the calls not begun by then are not made).
func inFlight(ctx context.Context, paths []string, window int, do func(context.Context, string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, window)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, p := range paths {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := do(ctx, p); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("%s: %w", p, err)
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// loadOnce loads a tree cache of root on a session of its own, and
// closes both.
func loadOnce(ctx context.Context, tg *target, root string, opts []cache.Option) error {
	conn, err := tg.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tc, err := cache.NewTree(conn, root, opts...)
	if err != nil {
		return err
	}
	defer tc.Close()
	ctx, cancel := context.WithTimeout(ctx, 300*time.Second)
	defer cancel()
	return tc.Initialized(ctx)
}

// cacheChanges sets n random leaves by writer, one at a time, each timed
// from just before the set to the NODE_UPDATED on sub carrying its data.
func cacheChanges(ctx context.Context, writer zk.Conn, sub *events.Subscription, leaves []string, rnd *rand.Rand, n, size int) ([]time.Duration, error) {
	var lat []time.Duration
	for i := range n {
		leaf := leaves[rnd.IntN(len(leaves))]
		d := nodeData(size, "chg-"+strconv.Itoa(i)+"-")
		t0 := time.Now()
		if _, err := writer.Set(ctx, leaf, d, zk.AnyVersion); err != nil {
			return lat, fmt.Errorf("change %d of %s: %w", i, leaf, err)
		}
		timeout := time.NewTimer(10 * time.Second)
	wait:
		for {
			select {
			case ev, ok := <-sub.C:
				if !ok {
					timeout.Stop()
					return lat, fmt.Errorf("change %d of %s: the subscription ended", i, leaf)
				}
				if ev.Type == events.NodeUpdated && ev.Node == leaf && bytes.Equal(ev.Data, d) {
					lat = append(lat, time.Since(t0))
					break wait
				}
			case <-timeout.C:
				return lat, fmt.Errorf("change %d of %s: no NODE_UPDATED with its data in 10 s", i, leaf)
			case <-ctx.Done():
				timeout.Stop()
				return lat, ctx.Err()
			}
		}
		timeout.Stop()
	}
	return lat, nil
}

// rawChanges times n raw sets of random leaves by writer, each to the
// NodeDataChanged of a data watch left just before by another session
// (lat), and to the reply of the get that session then makes (withGet):
// a watch says that a node changed, not to what, so this is the least a
// cache that shows the new data can take.
func rawChanges(ctx context.Context, tg *target, writer zk.Conn, leaves []string, rnd *rand.Rand, n, size int) (lat, withGet []time.Duration, err error) {
	if n == 0 {
		return nil, nil, nil
	}
	watcher, err := tg.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer watcher.Close()
	for i := range n {
		leaf := leaves[rnd.IntN(len(leaves))]
		_, _, w, err := watcher.GetW(ctx, leaf)
		if err != nil {
			return lat, withGet, fmt.Errorf("raw change %d: %w", i, err)
		}
		d := nodeData(size, "raw-"+strconv.Itoa(i)+"-")
		t0 := time.Now()
		if _, err := writer.Set(ctx, leaf, d, zk.AnyVersion); err != nil {
			return lat, withGet, fmt.Errorf("raw change %d: %w", i, err)
		}
		select {
		case ev := <-w:
			if ev.Type != zk.EventNodeDataChanged {
				return lat, withGet, fmt.Errorf("raw change %d: watch event %v", i, ev.Type)
			}
			lat = append(lat, time.Since(t0))
		case <-time.After(10 * time.Second):
			return lat, withGet, fmt.Errorf("raw change %d: no watch event in 10 s", i)
		case <-ctx.Done():
			return lat, withGet, ctx.Err()
		}
		got, _, err := watcher.Get(ctx, leaf)
		if err != nil {
			return lat, withGet, fmt.Errorf("raw change %d: %w", i, err)
		}
		if !bytes.Equal(got, d) {
			return lat, withGet, fmt.Errorf("raw change %d: read %q after the watch event, want %q", i, got, d)
		}
		withGet = append(withGet, time.Since(t0))
	}
	return lat, withGet, nil
}

// rawTreeLoad reads the tree at root as the cache does, by hand on a
// session of its own: a get with a data watch of every node, and a
// listing with a child watch of every node above maxDepth (negative: no
// limit), level by level, as many requests in flight as the cache has
// at most. It returns how long that took and the nodes read.
func rawTreeLoad(ctx context.Context, tg *target, root string, maxDepth int) (time.Duration, int, error) {
	conn, err := tg.connect(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	t0 := time.Now()
	level, read := []string{root}, 0
	for depth := 0; len(level) > 0; depth++ {
		list := maxDepth < 0 || depth < maxDepth
		var mu sync.Mutex
		var next []string
		reqs := make([]string, 0, 2*len(level)) // "d"+path: a get; "l"+path: a listing
		for _, p := range level {
			reqs = append(reqs, "d"+p)
			if list {
				reqs = append(reqs, "l"+p)
			}
		}
		err := inFlight(ctx, reqs, rawLoadInFlight, func(ctx context.Context, r string) error {
			p := r[1:]
			if r[0] == 'd' {
				_, _, _, err := conn.GetW(ctx, p)
				return err
			}
			kids, _, _, err := conn.ChildrenW(ctx, p)
			mu.Lock()
			for _, k := range kids {
				next = append(next, zk.Join(p, k))
			}
			mu.Unlock()
			return err
		})
		if err != nil {
			return 0, read, err
		}
		read += len(level)
		level = next
	}
	return time.Since(t0), read, nil
}

// rawLoadInFlight is the most requests the cache has in flight (package
// cache's bound).
const rawLoadInFlight = 256

// groupCost makes a group of n members in dir (ephemeral nodes of the
// writer's session, as group.Join makes them) and measures group.Watch of
// it on a session of its own: its load, and what it costs once loaded.
func groupCost(ctx context.Context, tg *target, writer zk.Conn, dir string, n, size, window int) (obj, error) {
	if err := createParents(ctx, writer, dir); err != nil {
		return nil, err
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s/member-%d", dir, i)
	}
	defer deleteAll(ctx, writer, ids, window)
	if err := createAll(ctx, writer, ids, size, window, zk.ModeEphemeral); err != nil {
		return nil, fmt.Errorf("group: %w", err)
	}
	conn, err := tg.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	m0 := measure()
	t0 := time.Now()
	g, err := group.Watch(conn, dir)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	lctx, cancel := context.WithTimeout(ctx, 300*time.Second)
	defer cancel()
	if err := g.Initialized(lctx); err != nil {
		return nil, fmt.Errorf("group: %w", err)
	}
	load := time.Since(t0)
	m1 := measure()
	got := len(g.Members())
	out := obj{{"group_members", got}, {"group_load_ms", round(float64(load)/float64(time.Millisecond), 1)}}
	out = append(out, m1.per(m0, got, "member")...)
	for i := range out[2:] {
		out[2+i].k = "group_" + out[2+i].k
	}
	if got != n {
		return out, fmt.Errorf("group.Watch holds %d members after Initialized, want %d", got, n)
	}
	return out, nil
}

// footprint is the process's live heap, goroutine stacks and goroutines.
type footprint struct {
	goroutines  int
	heap, stack uint64
}

// measure is the footprint once garbage is collected and goroutines that
// are ending have ended.
func measure() footprint {
	g, heap := settled()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return footprint{goroutines: g, heap: heap, stack: m.StackInuse}
}

// per is what f has more than before, over n things called what.
func (f footprint) per(before footprint, n int, what string) obj {
	if n == 0 {
		n = 1
	}
	d := func(a, b uint64) float64 { return float64(int64(a)-int64(b)) / float64(n) }
	return obj{
		{"heap_bytes_per_" + what, round(d(f.heap, before.heap), 0)},
		{"stack_bytes_per_" + what, round(d(f.stack, before.stack), 0)},
		{"goroutines_per_" + what, round(float64(f.goroutines-before.goroutines)/float64(n), 3)},
	}
}

// packetsReceived is zk_packets_received from mntr on the first server.
func (c *common) packetsReceived(ctx context.Context) (int64, error) {
	addr := c.conn.Servers[0]
	var reply string
	var err error
	if c.conn.TLS != nil {
		cfg := c.conn.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		reply, err = zkserver.FourLetterWordTLS(ctx, addr, cfg, "mntr")
	} else {
		reply, err = zkserver.FourLetterWord(ctx, addr, "mntr")
	}
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(reply, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "zk_packets_received" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no zk_packets_received in mntr's reply %q (is mntr allowed: 4lw.commands.whitelist?)", strings.TrimSpace(reply))
}
