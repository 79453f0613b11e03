package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
)

// lockClient is one client's share of a lock run: measured samples only.
type lockClient struct {
	acquire, release, cycle []time.Duration
	holds                   []hold
	lastEnd                 time.Time
	err                     error
}

// hold is one hold of the lock: from Acquire returning to Release being
// called.
type hold struct{ from, to time.Time }

// lockBench is the peers' LockBench: every client has its own session, lock
// handle and goroutine, and loops Acquire/Release on one path with nothing
// held in between. The cycle begun before the end of the run completes; the
// samples of cycles begun during warm-up are dropped. acq_per_s divides the
// measured acquisitions by the time from the end of warm-up to the last
// measured release. max_holders counts clients between Acquire returning and
// Release being called, so any overlap of two holders shows. handoff_us
// (not in the peers' lines) is the time from a holder calling Release to the
// next holder's Acquire returning: in a contended run, where someone always
// waits, it is the whole cost of passing the lock on.
func lockBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("lock")
	clients := c.fs.Int("clients", 4, "clients: one session, one lock handle and one goroutine each; 1 = uncontended")
	duration := c.fs.Duration("duration", 10*time.Second, "measured duration")
	warmup := c.fs.Duration("warmup", 2*time.Second, "unmeasured warm-up before measuring")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	if *clients < 1 {
		return nil, errors.New("-clients must be at least 1")
	}
	tg := c.target()
	conns := make([]zk.Conn, *clients)
	locks := make([]*lock.Lock, *clients)
	defer func() {
		for i := range conns {
			if locks[i] != nil {
				locks[i].Close()
			}
			if conns[i] != nil {
				conns[i].Close()
			}
		}
	}()
	for i := range conns {
		var err error
		if conns[i], err = tg.connect(ctx); err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		if locks[i], err = lock.New(conns[i], c.path, lock.WithID(fmt.Sprintf("client-%d", i))); err != nil {
			return nil, err
		}
	}

	var holders, maxHolders, violations atomic.Int32
	start := time.Now()
	measureStart := start.Add(*warmup)
	end := measureStart.Add(*duration)
	res := make([]lockClient, *clients)
	var wg sync.WaitGroup
	for i, l := range locks {
		r := &res[i]
		wg.Go(func() {
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				if _, err := l.Acquire(ctx); err != nil {
					r.err = fmt.Errorf("client %d: acquire: %w", i, err)
					return
				}
				t1 := time.Now()
				h := holders.Add(1)
				if h > 1 {
					violations.Add(1)
				}
				for m := maxHolders.Load(); h > m && !maxHolders.CompareAndSwap(m, h); m = maxHolders.Load() {
				}
				holders.Add(-1)
				t2 := time.Now()
				if err := l.Release(ctx); err != nil {
					r.err = fmt.Errorf("client %d: release: %w", i, err)
					return
				}
				t3 := time.Now()
				if !t0.Before(measureStart) {
					r.acquire = append(r.acquire, t1.Sub(t0))
					r.release = append(r.release, t3.Sub(t2))
					r.cycle = append(r.cycle, t1.Sub(t0)+t3.Sub(t2))
					r.holds = append(r.holds, hold{t1, t2})
					r.lastEnd = t3
				}
			}
		})
	}
	wg.Wait()

	var acq, rel, cyc []time.Duration
	var holds []hold
	errs := []string{}
	lastEnd := measureStart
	perMin, perMax := len(res[0].acquire), 0
	for _, r := range res {
		acq, rel, cyc = append(acq, r.acquire...), append(rel, r.release...), append(cyc, r.cycle...)
		holds = append(holds, r.holds...)
		perMin, perMax = min(perMin, len(r.acquire)), max(perMax, len(r.acquire))
		if r.lastEnd.After(lastEnd) {
			lastEnd = r.lastEnd
		}
		if r.err != nil {
			errs = append(errs, r.err.Error())
		}
	}
	elapsed := lastEnd.Sub(measureStart).Seconds()
	var perS any // null, as in the peers, when nothing was measured
	if elapsed > 0 {
		perS = round(float64(len(acq))/elapsed, 1)
	}
	mode := "contended"
	if *clients == 1 {
		mode = "uncontended"
	}
	left := nodesLeft(ctx, conns[0], c.path)
	if err := deleteTree(ctx, conns[0], c.path); err != nil {
		fmt.Fprintf(os.Stderr, "zkbench lock: cleanup %s: %v\n", c.path, err)
	}
	mutexOK := violations.Load() == 0 && maxHolders.Load() <= 1
	params := obj{{"clients", *clients}, {"duration_s", duration.Seconds()}, {"warmup_s", warmup.Seconds()},
		{"session_ms", c.session.Milliseconds()}, {"path", c.path}}
	return append(c.header("lock", params),
		field{"mode", mode}, field{"clients", *clients}, field{"acquisitions", len(acq)},
		field{"elapsed_s", round(elapsed, 3)}, field{"acq_per_s", perS},
		field{"acquire_us", summary(acq, micros)}, field{"release_us", summary(rel, micros)},
		field{"cycle_us", summary(cyc, micros)},
		field{"per_client_min", perMin}, field{"per_client_max", perMax},
		field{"max_holders", maxHolders.Load()}, field{"mutex_violations", violations.Load()},
		field{"mutex_ok", mutexOK}, field{"errors", errs},
		field{"ok", len(errs) == 0 && mutexOK && len(acq) > 0},
		field{"lock_nodes_left", left}, field{"handoff_us", summary(handoffs(holds), micros)},
	), nil
}

// handoffs are the gaps between consecutive holds, in grant order.
func handoffs(holds []hold) []time.Duration {
	slices.SortFunc(holds, func(a, b hold) int { return a.from.Compare(b.from) })
	var d []time.Duration
	for i := 1; i < len(holds); i++ {
		d = append(d, holds[i].from.Sub(holds[i-1].to))
	}
	return d
}

// nodesLeft counts the nodes under path once every client has released: a
// node there was left behind. -1 when it cannot be read.
func nodesLeft(ctx context.Context, c zk.Conn, path string) int {
	kids, _, err := c.Children(ctx, path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0
	case err != nil:
		return -1
	}
	return len(kids)
}
