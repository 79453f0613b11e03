package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
)

// scaleBench is the runtime at the size of a service: -handles lock
// handles (one actor each) on -paths paths over -conns connections. It
// measures what an idle handle costs (heap after a GC, goroutines), then
// has every handle acquire and release once, all at once (wall time, peak
// goroutines, and — with -events, each handle subscribed — the lifecycle
// events published per second), closes them all and reports any goroutine
// left above the baseline (a watch that never fires keeps a goroutine of
// the connection until the session ends: see fireMark in
// machines/contention). -idle adds a pass that only creates and closes
// that many more handles (on "sim" 100000 is quick). The run is not ok
// when a handle failed, a goroutine is left after Close, or an idle handle
// costs 16 KiB of heap or more than one goroutine.
func scaleBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("scale")
	handles := c.fs.Int("handles", 10000, "lock handles that each acquire and release once")
	paths := c.fs.Int("paths", 100, "lock paths the handles share")
	conns := c.fs.Int("conns", 8, "connections the handles share")
	idle := c.fs.Int("idle", 0, "handles of an extra pass that are only created, measured and closed")
	countEvents := c.fs.Bool("events", true, "subscribe to every handle's events during the run and count them (one subscription goroutine per handle)")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	if *handles < 1 || *paths < 1 || *conns < 1 || *idle < 0 {
		return nil, errors.New("-handles, -paths and -conns must be at least 1, -idle not negative")
	}
	tg := c.target()
	cs := make([]zk.Conn, *conns)
	defer func() {
		for _, cn := range cs {
			if cn != nil {
				cn.Close()
			}
		}
	}()
	for i := range cs {
		var err error
		if cs[i], err = tg.connect(ctx); err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	baseG, baseHeap := settled()

	perHandle, perHandleG, err := idleCost(cs, c.path+"/idle", *handles, *paths)
	if err != nil {
		return nil, err
	}

	ls := make([]*lock.Lock, *handles)
	for i := range ls {
		if ls[i], err = lock.New(cs[i%len(cs)], fmt.Sprintf("%s/p%d", c.path, i%*paths)); err != nil {
			return nil, err
		}
	}
	var subs []*events.Subscription
	if *countEvents {
		subs = make([]*events.Subscription, len(ls))
		for i, l := range ls {
			subs[i] = l.Subscribe()
		}
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if g := int64(runtime.NumGoroutine()); g > peak.Load() {
				peak.Store(g)
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	})
	var failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() {
			if _, err := l.Acquire(ctx); err != nil {
				failed.Add(1)
				errOnce.Do(func() { firstErr = err })
				return
			}
			if err := l.Release(ctx); err != nil {
				failed.Add(1)
				errOnce.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(stop)
	sampler.Wait()
	end := start.Add(wall)
	for _, l := range ls {
		l.Close()
	}
	// Every handle's bus is closed: each subscription hands over what it
	// queued, then ends.
	var published, closing int
	for _, sub := range subs {
		for ev := range sub.C {
			if ev.Time.After(end) {
				closing++
			} else {
				published++
			}
		}
		sub.Close()
	}
	leftG := settledTo(baseG, 5*time.Second)
	errs := []string{}
	if firstErr != nil {
		errs = append(errs, fmt.Sprintf("%d handles failed, first: %v", failed.Load(), firstErr))
	}
	leaked := leftG - baseG
	if leaked > 0 {
		errs = append(errs, fmt.Sprintf("%d goroutines left after every handle's Close", leaked))
	}
	if perHandle > idleHeapBudget || perHandleG > 1 {
		errs = append(errs, fmt.Sprintf("an idle handle costs %.0f B of heap and %.2f goroutines (budget %d B, 1)", perHandle, perHandleG, idleHeapBudget))
	}

	var idlePer, idlePerG, idleLeft any
	if *idle > 0 {
		h, g, err := idleCost(cs, c.path+"/idle2", *idle, *paths)
		if err != nil {
			return nil, err
		}
		idlePer, idlePerG = h, g
		left := settledTo(baseG, 5*time.Second) - baseG
		idleLeft = left
		if left > 0 {
			errs = append(errs, fmt.Sprintf("%d goroutines left after the idle pass's Close", left))
		}
		if h > idleHeapBudget || g > 1 {
			errs = append(errs, fmt.Sprintf("idle pass: a handle costs %.0f B of heap and %.2f goroutines (budget %d B, 1)", h, g, idleHeapBudget))
		}
	}
	if err := deleteTree(ctx, cs[0], c.path); err != nil {
		return nil, fmt.Errorf("cleanup %s: %w", c.path, err)
	}
	var eventsPerS, subG any
	if *countEvents {
		eventsPerS, subG = round(float64(published)/wall.Seconds(), 0), len(subs)
	}
	params := obj{{"handles", *handles}, {"paths", *paths}, {"conns", *conns}, {"idle", *idle}, {"events", *countEvents}, {"path", c.path}}
	return append(c.header("scale", params),
		field{"handles", *handles}, field{"wall_s", round(wall.Seconds(), 3)},
		field{"acq_per_s", round(float64(*handles-int(failed.Load()))/wall.Seconds(), 1)},
		field{"peak_goroutines", peak.Load() - int64(baseG)}, field{"subscription_goroutines", subG},
		field{"events_published", published}, field{"events_per_s", eventsPerS}, field{"events_at_close", closing},
		field{"idle_heap_bytes_per_handle", perHandle}, field{"idle_goroutines_per_handle", perHandleG},
		field{"idle_pass_heap_bytes_per_handle", idlePer}, field{"idle_pass_goroutines_per_handle", idlePerG},
		field{"goroutines_left_after_close", leaked}, field{"goroutines_left_after_idle_pass", idleLeft},
		field{"base_goroutines", baseG}, field{"base_heap_bytes", baseHeap},
		field{"errors", errs}, field{"ok", len(errs) == 0},
	), nil
}

// idleHeapBudget is what an idle handle may cost in heap (issue 16).
const idleHeapBudget = 16 << 10

// idleCost creates n lock handles on paths under dir, measures the heap
// and goroutines they add once the garbage is collected, and closes them.
func idleCost(cs []zk.Conn, dir string, n, paths int) (heapPerHandle float64, goroutinesPerHandle float64, err error) {
	g0, h0 := settled()
	ls := make([]*lock.Lock, n)
	for i := range ls {
		if ls[i], err = lock.New(cs[i%len(cs)], fmt.Sprintf("%s/p%d", dir, i%paths)); err != nil {
			return 0, 0, err
		}
	}
	g1, h1 := settled()
	for _, l := range ls {
		l.Close()
	}
	return round(float64(int64(h1)-int64(h0))/float64(n), 0), round(float64(g1-g0)/float64(n), 2), nil
}

// settled returns the goroutine count and the live heap once goroutines
// that are ending have ended and garbage is collected.
func settled() (goroutines int, heap uint64) {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
		runtime.Gosched()
	}
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapAlloc
}

// settledTo waits up to d for the goroutine count to come back to base
// (goroutines that a Close stopped may take a moment to return), and
// returns it.
func settledTo(base int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		g, _ := settled()
		if g <= base || time.Now().After(deadline) {
			return g
		}
		time.Sleep(10 * time.Millisecond)
	}
}
