package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
)

// barrierScenario: 5 workers, each with its own session, start together
// and finish together on a double barrier. They arrive one by one; no one
// starts before the fifth arrives. Each works a different time; worker-3
// crashes inside (on the simulator its session expires; on a server its
// connection closes), and is counted out: the others leave together
// without it, and no node is left.
func barrierScenario(ctx context.Context, c *cluster, p *printer, hold time.Duration) error {
	defer p.flush()
	const path, workers, crasher = "/demo/barrier", 5, 2
	p.say("barrier: %d workers start together and finish together on %s; worker-3 crashes inside, on %s", workers, path, c.where)
	var printing sync.WaitGroup
	conns := make([]zk.Conn, workers)
	members := make([]*barrier.DoubleBarrier, workers)
	for i := range members {
		conn, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		conns[i] = conn
		who := fmt.Sprintf("worker-%d", i+1)
		if members[i], err = barrier.NewDouble(conn, path, workers, barrier.WithID(who)); err != nil {
			return err
		}
		defer members[i].Close()
		p.follow(&printing, who, members[i].Subscribe())
	}

	var arrived, inside atomic.Int32
	var lastArrival atomic.Int64
	started := make([]time.Time, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i, d := range members {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 2 * hold) // they arrive one by one
			lastArrival.Store(time.Now().UnixNano())
			arrived.Add(1)
			if err := d.Enter(ctx); err != nil {
				errs[i] = fmt.Errorf("worker-%d: enter: %w", i+1, err)
				return
			}
			started[i] = time.Now()
			if n := arrived.Load(); n < workers {
				errs[i] = fmt.Errorf("worker-%d started with %d of %d arrived", i+1, n, workers)
				return
			}
			inside.Add(1)
			if i == crasher {
				p.say("worker-3 crashes inside: %s", p.crash(c, "worker-3", conns[i]))
				return
			}
			time.Sleep(time.Duration(workers-i) * hold) // the work
			if err := d.Leave(ctx); err != nil {
				errs[i] = fmt.Errorf("worker-%d: leave: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	left, _, err := conns[0].Children(ctx, path)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	for _, d := range members {
		d.Close() // ends its subscription once every event is printed
	}
	printing.Wait()
	last := time.Unix(0, lastArrival.Load())
	var first, latest time.Time
	for i, s := range started {
		if i == crasher && s.IsZero() {
			continue
		}
		if first.IsZero() || s.Before(first) {
			first = s
		}
		if s.After(latest) {
			latest = s
		}
	}
	p.say("barrier summary")
	p.say("  all %d started after the fifth arrived: the first %s after it, the last %s after it", inside.Load(),
		first.Sub(last).Round(time.Microsecond), latest.Sub(last).Round(time.Microsecond))
	p.say("  worker-3 counted out after its crash; the 4 others left together; nodes left: %d", len(left))
	if len(left) != 0 {
		return fmt.Errorf("nodes left under %s: %v", path, left)
	}
	return nil
}
