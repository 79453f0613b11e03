package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
)

// semaphoreScenario: 8 workers, each with its own session and handle,
// share a semaphore of 3 leases. worker-1 takes a lease and keeps it; the
// 7 others take a lease rounds times each, hold it for hold and release
// it, sharing the 2 leases left. Then worker-1's session ends (on the
// simulator it expires; on a server its connection closes): its
// Lease.Lost() closes, the server deletes its lease node, and the lease
// returns. To show it, the 7 take one lease more each, and each holds
// until 3 hold at once. Every transition of every handle is printed.
func semaphoreScenario(ctx context.Context, c *cluster, p *printer, rounds int, hold time.Duration) error {
	defer p.flush()
	const path, workers, leases = "/demo/semaphore", 8, 3
	p.say("semaphore: %d workers share %d leases of %s, on %s", workers, leases, path, c.where)
	var printing sync.WaitGroup
	sems := make([]*semaphore.Semaphore, workers)
	conns := make([]zk.Conn, workers)
	for i := range sems {
		conn, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		conns[i] = conn
		if sems[i], err = semaphore.New(conn, path, leases, semaphore.WithID(fmt.Sprintf("worker-%d", i+1))); err != nil {
			return err
		}
		defer sems[i].Close()
		p.follow(&printing, fmt.Sprintf("worker-%d", i+1), sems[i].Subscribe())
	}

	var held holdCount // the 7 others' leases
	kept, err := sems[0].Acquire(ctx)
	if err != nil {
		return fmt.Errorf("worker-1: %w", err)
	}
	p.say("worker-1 holds a lease (token %#x) and keeps it; 7 workers share the 2 left, %d times each", kept.Token(), rounds)

	// The 7 others, rounds times each.
	others := sems[1:]
	counts := make([]int, len(others))
	if err := each(others, func(i int, s *semaphore.Semaphore) error {
		for range rounds {
			l, err := s.Acquire(ctx)
			if err != nil {
				return err
			}
			held.add(1)
			counts[i]++
			time.Sleep(hold) // the work done under the lease
			held.add(-1)
			if err := l.Release(ctx); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	before := held.most.Load()
	p.say("while worker-1 kept its lease, the 7 others held at most %d at once", before)

	how := p.crash(c, "worker-1", conns[0])
	<-kept.Lost()
	p.say("worker-1: %s; its Lease.Lost() closed (%v), and its lease returns", how, kept.Err())

	// Each of the 7 takes one lease more, and holds it until 3 hold at
	// once: that needs worker-1's lease back.
	held.most.Store(0)
	three := make(chan struct{})
	var once sync.Once
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := each(others, func(i int, s *semaphore.Semaphore) error {
		l, err := s.Acquire(wctx)
		if err != nil {
			return err
		}
		if held.add(1) == leases {
			once.Do(func() { close(three) })
		}
		defer l.Release(ctx)
		select {
		case <-three:
		case <-wctx.Done():
			return fmt.Errorf("only %d leases could be held at once after worker-1's session ended: %w", held.now.Load(), wctx.Err())
		}
		held.add(-1)
		counts[i]++
		return nil
	}); err != nil {
		return err
	}
	after := held.most.Load()
	p.say("after worker-1's session ended, the 7 others held %d at once", after)

	for _, s := range sems {
		s.Close() // ends its subscription once every event is printed
	}
	printing.Wait()
	per := make([]string, len(counts))
	for i, n := range counts {
		per[i] = fmt.Sprintf("worker-%d %d", i+2, n)
	}
	p.say("semaphore summary")
	p.say("  leases taken per worker: worker-1 1 (lost with its session), %s", strings.Join(per, ", "))
	p.say("  maximum concurrent holders (measured): %d while worker-1 held, %d after its session ended", before+1, after)
	switch {
	case before > leases-1:
		return fmt.Errorf("%d leases held at once beside worker-1's: more than %d", before, leases-1)
	case after != leases:
		return fmt.Errorf("%d leases held at once after worker-1's session ended, want %d", after, leases)
	case !errors.Is(kept.Err(), semaphore.ErrSessionLost) && !errors.Is(kept.Err(), semaphore.ErrSuspended) && !errors.Is(kept.Err(), semaphore.ErrClosed):
		return fmt.Errorf("worker-1's lease ended with %v", kept.Err())
	}
	return nil
}

// each runs fn for every semaphore at once and returns the first error.
func each(sems []*semaphore.Semaphore, fn func(i int, s *semaphore.Semaphore) error) error {
	errs := make([]error, len(sems))
	var wg sync.WaitGroup
	for i, s := range sems {
		wg.Go(func() {
			if err := fn(i, s); err != nil {
				errs[i] = fmt.Errorf("worker-%d: %w", i+2, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// holdCount counts the leases held at once, as the workers see them
// (between Acquire returning and Release, or Lost), and the most seen.
type holdCount struct{ now, most atomic.Int32 }

// add changes the count by d and returns the new count.
func (h *holdCount) add(d int32) int32 {
	n := h.now.Add(d)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	return n
}
