package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
)

// semaphoreBench is the peers' SemaphoreBench: every client has its own
// session, semaphore handle and goroutine, and loops Acquire / hold /
// Release of one lease on one path of -leases leases. The cycle begun
// before the end of the run completes; the samples of cycles begun during
// warm-up are dropped. acq_per_s divides the measured acquisitions by the
// time from the end of warm-up to the last measured release. max_holders
// counts clients between Acquire returning and Release being called;
// violations counts the acquisitions that saw more than -leases holders.
func semaphoreBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("semaphore")
	clients := c.fs.Int("clients", 8, "clients: one session, one semaphore handle and one goroutine each")
	leases := c.fs.Int("leases", 2, "maxLeases of the semaphore")
	duration := c.fs.Duration("duration", 10*time.Second, "measured duration")
	warmup := c.fs.Duration("warmup", 2*time.Second, "unmeasured warm-up before measuring")
	holdUs := c.fs.Int("hold-us", 1000, "how long a client holds its lease, in microseconds")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	switch {
	case *clients < 1:
		return nil, errors.New("-clients must be at least 1")
	case *leases < 1:
		return nil, errors.New("-leases must be at least 1")
	case *holdUs < 0:
		return nil, errors.New("-hold-us must not be negative")
	}
	tg := c.target()
	conns := make([]zk.Conn, *clients)
	sems := make([]*semaphore.Semaphore, *clients)
	defer func() {
		for i := range conns {
			if sems[i] != nil {
				sems[i].Close()
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
		if sems[i], err = semaphore.New(conns[i], c.path, *leases, semaphore.WithID(fmt.Sprintf("client-%d", i))); err != nil {
			return nil, err
		}
	}

	holdFor := time.Duration(*holdUs) * time.Microsecond
	var holders, maxHolders, violations atomic.Int32
	start := time.Now()
	measureStart := start.Add(*warmup)
	end := measureStart.Add(*duration)
	res := make([]lockClient, *clients)
	var wg sync.WaitGroup
	for i, s := range sems {
		r := &res[i]
		wg.Go(func() {
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				l, err := s.Acquire(ctx)
				if err != nil {
					r.err = fmt.Errorf("client %d: acquire: %w", i, err)
					return
				}
				t1 := time.Now()
				h := holders.Add(1)
				if h > int32(*leases) {
					violations.Add(1)
				}
				for m := maxHolders.Load(); h > m && !maxHolders.CompareAndSwap(m, h); m = maxHolders.Load() {
				}
				work(holdFor)
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
					r.lastEnd = t3
				}
			}
		})
	}
	wg.Wait()

	var acq, rel, cyc []time.Duration
	errs := []string{}
	lastEnd := measureStart
	perMin, perMax := len(res[0].acquire), 0
	for _, r := range res {
		acq, rel, cyc = append(acq, r.acquire...), append(rel, r.release...), append(cyc, r.cycle...)
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
	if *clients <= *leases {
		mode = "uncontended"
	}
	left := nodesLeft(ctx, conns[0], semaphore.LeasesDir(c.path))
	if err := deleteTree(ctx, conns[0], c.path); err != nil {
		fmt.Fprintf(os.Stderr, "zkbench semaphore: cleanup %s: %v\n", c.path, err)
	}
	params := obj{{"clients", *clients}, {"leases", *leases}, {"duration_s", duration.Seconds()},
		{"warmup_s", warmup.Seconds()}, {"hold_us", *holdUs}, {"session_ms", c.session.Milliseconds()}, {"path", c.path}}
	return append(c.header("semaphore", params),
		field{"mode", mode}, field{"clients", *clients}, field{"leases", *leases}, field{"acquisitions", len(acq)},
		field{"elapsed_s", round(elapsed, 3)}, field{"acq_per_s", perS},
		field{"acquire_us", summary(acq, micros)}, field{"release_us", summary(rel, micros)},
		field{"cycle_us", summary(cyc, micros)},
		field{"per_client_min", perMin}, field{"per_client_max", perMax},
		field{"max_holders", maxHolders.Load()}, field{"violations", violations.Load()},
		field{"errors", errs}, field{"ok", len(errs) == 0 && violations.Load() == 0 && len(acq) > 0},
		field{"lease_nodes_left", left},
	), nil
}
