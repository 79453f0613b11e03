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
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
)

// rwClient is one client's share of an rwlock run: measured samples only.
type rwClient struct {
	acquire []time.Duration
	lastEnd time.Time
	err     error
}

// rwlockBench is the peers' RwLockBench: readers and writers, one session,
// one participant and one goroutine each, loop Acquire / hold / Release
// on one read/write lock. A writer counts a violation when anyone else is
// in while it holds; a reader when a writer is. Cycles begun during
// warm-up are not measured; the rates divide the measured acquisitions by
// the time from the end of warm-up to the last measured release.
func rwlockBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("rwlock")
	readers := c.fs.Int("readers", 4, "reader clients")
	writers := c.fs.Int("writers", 2, "writer clients")
	holdUs := c.fs.Int("hold-us", 1000, "microseconds each holder keeps the lock")
	duration := c.fs.Duration("duration", 10*time.Second, "measured duration")
	warmup := c.fs.Duration("warmup", 2*time.Second, "unmeasured warm-up before measuring")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	if *readers < 0 || *writers < 0 || *readers+*writers == 0 {
		return nil, errors.New("-readers and -writers must not be negative, nor both 0")
	}
	n := *readers + *writers
	tg := c.target()
	conns := make([]zk.Conn, n)
	rws := make([]*rwlock.RWLock, n)
	defer func() {
		for i := range conns {
			if rws[i] != nil {
				rws[i].Close()
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
		if rws[i], err = rwlock.New(conns[i], c.path, rwlock.WithID(fmt.Sprintf("client-%d", i))); err != nil {
			return nil, err
		}
	}

	hold := time.Duration(*holdUs) * time.Microsecond
	var readersIn, writersIn, maxReaders, violations atomic.Int32
	start := time.Now()
	measureStart := start.Add(*warmup)
	end := measureStart.Add(*duration)
	res := make([]rwClient, n)
	var wg sync.WaitGroup
	for i, rw := range rws {
		writer := i >= *readers
		l := rw.ReadLock()
		if writer {
			l = rw.WriteLock()
		}
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
				if writer {
					if writersIn.Add(1) != 1 || readersIn.Load() != 0 {
						violations.Add(1)
					}
					work(hold)
					if readersIn.Load() != 0 {
						violations.Add(1)
					}
					writersIn.Add(-1)
				} else {
					in := readersIn.Add(1)
					for m := maxReaders.Load(); in > m && !maxReaders.CompareAndSwap(m, in); m = maxReaders.Load() {
					}
					if writersIn.Load() != 0 {
						violations.Add(1)
					}
					work(hold)
					if writersIn.Load() != 0 {
						violations.Add(1)
					}
					readersIn.Add(-1)
				}
				if err := l.Release(ctx); err != nil {
					r.err = fmt.Errorf("client %d: release: %w", i, err)
					return
				}
				if !t0.Before(measureStart) {
					r.acquire = append(r.acquire, t1.Sub(t0))
					r.lastEnd = time.Now()
				}
			}
		})
	}
	wg.Wait()

	var readAcq, writeAcq []time.Duration
	errs := []string{}
	lastEnd := measureStart
	for i, r := range res {
		if i >= *readers {
			writeAcq = append(writeAcq, r.acquire...)
		} else {
			readAcq = append(readAcq, r.acquire...)
		}
		if r.lastEnd.After(lastEnd) {
			lastEnd = r.lastEnd
		}
		if r.err != nil {
			errs = append(errs, r.err.Error())
		}
	}
	elapsed := lastEnd.Sub(measureStart).Seconds()
	var readsPerS, writesPerS any
	if elapsed > 0 {
		readsPerS = round(float64(len(readAcq))/elapsed, 1)
		writesPerS = round(float64(len(writeAcq))/elapsed, 1)
	}
	left := nodesLeft(ctx, conns[0], c.path)
	if err := deleteTree(ctx, conns[0], c.path); err != nil {
		fmt.Fprintf(os.Stderr, "zkbench rwlock: cleanup %s: %v\n", c.path, err)
	}
	params := obj{{"readers", *readers}, {"writers", *writers}, {"duration_s", duration.Seconds()},
		{"warmup_s", warmup.Seconds()}, {"hold_us", *holdUs}, {"session_ms", c.session.Milliseconds()}, {"path", c.path}}
	return append(c.header("rwlock", params),
		field{"readers", *readers}, field{"writers", *writers}, field{"elapsed_s", round(elapsed, 3)},
		field{"read_acquisitions", len(readAcq)}, field{"write_acquisitions", len(writeAcq)},
		field{"reads_per_s", readsPerS}, field{"writes_per_s", writesPerS},
		field{"read_acquire_us", summary(readAcq, micros)}, field{"write_acquire_us", summary(writeAcq, micros)},
		field{"max_concurrent_readers", maxReaders.Load()}, field{"violations", violations.Load()},
		field{"rw_ok", violations.Load() == 0}, field{"errors", errs},
		field{"ok", len(errs) == 0 && violations.Load() == 0 && len(readAcq)+len(writeAcq) > 0},
		field{"lock_nodes_left", left},
	), nil
}
