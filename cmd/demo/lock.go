package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/lock"
)

// lockScenario: workers, each with its own session and lock handle, take
// one lock rounds times each, hold it for hold, and release it. Every
// transition of every handle is printed as it happens. The summary counts
// acquisitions per worker, the most workers seen holding at once (between
// Acquire returning and Release being called), and the wait for the lock.
func lockScenario(ctx context.Context, c *cluster, p *printer, workers, rounds int, hold time.Duration) error {
	defer p.flush()
	p.say("lock: %d workers take /demo/lock %d times each, on %s", workers, rounds, c.where)
	var printing sync.WaitGroup
	locks := make([]*lock.Lock, workers)
	for i := range locks {
		conn, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if locks[i], err = lock.New(conn, "/demo/lock", lock.WithID(fmt.Sprintf("worker-%d", i+1))); err != nil {
			return err
		}
		p.follow(&printing, fmt.Sprintf("worker-%d", i+1), locks[i].Subscribe())
	}

	var holders, maxHolders atomic.Int32
	waits := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i, l := range locks {
		wg.Go(func() {
			for range rounds {
				start := time.Now()
				if _, err := l.Acquire(ctx); err != nil {
					errs[i] = err
					return
				}
				waits[i] = append(waits[i], time.Since(start))
				h := holders.Add(1)
				for m := maxHolders.Load(); h > m && !maxHolders.CompareAndSwap(m, h); m = maxHolders.Load() {
				}
				time.Sleep(hold) // the work done under the lock
				holders.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, l := range locks {
		l.Close() // ends its subscription once every event is printed
	}
	printing.Wait()

	var all []time.Duration
	counts := make([]string, workers)
	for i, w := range waits {
		all = append(all, w...)
		counts[i] = fmt.Sprintf("worker-%d %d", i+1, len(w))
	}
	p.say("lock summary")
	p.say("  acquisitions per worker: %s", strings.Join(counts, ", "))
	p.say("  maximum concurrent holders (measured): %d", maxHolders.Load())
	if len(all) > 0 {
		p.say("  wait for the lock: p50 %v, p99 %v over %d acquisitions",
			percentile(all, .50).Round(time.Microsecond), percentile(all, .99).Round(time.Microsecond), len(all))
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("worker-%d: %w", i+1, err)
		}
	}
	if maxHolders.Load() != 1 {
		return fmt.Errorf("%d workers held the lock at once", maxHolders.Load())
	}
	return nil
}
