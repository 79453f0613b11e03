package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
)

// barrierBench is the peers' BarrierBench: -members members (one session
// each) enter and leave a double barrier for -rounds rounds, a fresh path
// each round, all starting at one instant t0: enter_ms is the last Enter's
// return - t0, leave_ms the last Leave's return - the last Enter's,
// total_ms the last Leave's return - t0. Then, in -rounds more rounds, all
// members but one wait in Enter before the last one arrives:
// last_arrival_ms times that arrival to the last Enter's return, beside
// create_notify_ms, a create by one session timed to the watch event it
// fires at another (the floor: the arrival's create and one
// notification), in the same run.
func barrierBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("barrier")
	members := c.fs.Int("members", 5, "members: one session and one goroutine each")
	rounds := c.fs.Int("rounds", 20, "rounds (a fresh path each)")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	if *members < 2 || *rounds < 1 {
		return nil, errors.New("-members must be at least 2 and -rounds at least 1")
	}
	tg := c.target()
	conns := make([]zk.Conn, *members)
	defer func() {
		for _, cn := range conns {
			if cn != nil {
				cn.Close()
			}
		}
	}()
	for i := range conns {
		var err error
		if conns[i], err = tg.connect(ctx); err != nil {
			return nil, fmt.Errorf("member %d: %w", i, err)
		}
	}
	var enter, leave, total, lastArrival []time.Duration
	errs := []string{}
	for r := range *rounds {
		e, l, err := barrierRound(ctx, conns, fmt.Sprintf("%s/r%d", c.path, r), false)
		if err != nil {
			errs = append(errs, fmt.Sprintf("round %d: %v", r, err))
			break
		}
		enter, leave, total = append(enter, e), append(leave, l), append(total, e+l)
	}
	for r := range *rounds {
		e, _, err := barrierRound(ctx, conns, fmt.Sprintf("%s/s%d", c.path, r), true)
		if err != nil {
			errs = append(errs, fmt.Sprintf("staggered round %d: %v", r, err))
			break
		}
		lastArrival = append(lastArrival, e)
	}
	if err := createParents(ctx, conns[0], c.path+"/notify"); err != nil {
		return nil, err
	}
	notify := make([]time.Duration, 0, *rounds*5)
	for i := range *rounds * 5 {
		d, err := timeCreateNotify(ctx, conns[0], conns[1], fmt.Sprintf("%s/notify/n%d", c.path, i))
		if err != nil {
			return nil, fmt.Errorf("create_notify_ms: %w", err)
		}
		notify = append(notify, d)
	}
	left := 0
	for r := range *rounds {
		left += nodesLeft(ctx, conns[0], fmt.Sprintf("%s/r%d", c.path, r)) + nodesLeft(ctx, conns[0], fmt.Sprintf("%s/s%d", c.path, r))
	}
	if err := deleteTree(ctx, conns[0], c.path); err != nil {
		fmt.Fprintf(os.Stderr, "zkbench barrier: cleanup %s: %v\n", c.path, err)
	}
	params := obj{{"members", *members}, {"rounds", *rounds}, {"session_ms", c.session.Milliseconds()}, {"path", c.path}}
	return append(c.header("barrier", params),
		field{"members", *members}, field{"rounds", len(enter)},
		field{"enter_ms", summary(enter, millis)}, field{"leave_ms", summary(leave, millis)},
		field{"total_ms", summary(total, millis)},
		field{"last_arrival_ms", summary(lastArrival, millis)}, field{"create_notify_ms", summary(notify, millis)},
		field{"last_arrival_p50_per_create_notify_p50", round(ratio(lastArrival, notify), 2)},
		field{"errors", errs}, field{"ok", len(errs) == 0 && left == 0}, field{"nodes_left", left},
	), nil
}

// barrierRound runs one round on path: every member enters, then leaves.
// Not staggered: all start at once, and enter is the last Enter's return
// from that start. Staggered: all but the last wait in Enter first, and
// enter is from the last one's Enter call to the last return.
func barrierRound(ctx context.Context, conns []zk.Conn, path string, staggered bool) (enter, leave time.Duration, err error) {
	ds := make([]*barrier.DoubleBarrier, len(conns))
	for i, cn := range conns {
		if ds[i], err = barrier.NewDouble(cn, path, len(conns)); err != nil {
			return 0, 0, err
		}
		defer ds[i].Close()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	entered := make([]time.Time, len(ds))
	leftAt := make([]time.Time, len(ds))
	errs := make([]error, len(ds))
	start := make(chan struct{})
	var t0 time.Time
	var wg sync.WaitGroup
	run := func(i int) {
		wg.Go(func() {
			<-start
			if errs[i] = ds[i].Enter(ctx); errs[i] != nil {
				return
			}
			entered[i] = time.Now()
			errs[i] = ds[i].Leave(ctx)
			leftAt[i] = time.Now()
		})
	}
	last := len(ds) - 1
	if staggered {
		for i := range last {
			run(i)
		}
		close(start)
		// The others are in once their nodes are: watch the path's
		// children until there are as many.
		if err := awaitChildCount(ctx, conns[last], path, last); err != nil {
			return 0, 0, err
		}
		start = make(chan struct{})
		t0 = time.Now()
		run(last)
		close(start)
	} else {
		for i := range ds {
			run(i)
		}
		t0 = time.Now()
		close(start)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	var lastEnter, lastLeave time.Time
	for i := range ds {
		if entered[i].After(lastEnter) {
			lastEnter = entered[i]
		}
		if leftAt[i].After(lastLeave) {
			lastLeave = leftAt[i]
		}
	}
	return lastEnter.Sub(t0), lastLeave.Sub(lastEnter), nil
}

// timeCreateNotify watches node from watcher, and times its create by conn
// from the start of the create to watcher's NodeCreated.
func timeCreateNotify(ctx context.Context, conn, watcher zk.Conn, node string) (time.Duration, error) {
	_, _, ch, err := watcher.ExistsW(ctx, node)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := conn.Create(ctx, node, nil, zk.ModePersistent); err != nil {
		return 0, err
	}
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeCreated {
			return 0, fmt.Errorf("watch on %s: %v", node, ev.Type)
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return time.Since(t0), nil
}

// awaitChildCount waits, on child watches, until path has n children.
func awaitChildCount(ctx context.Context, c zk.Conn, path string, n int) error {
	for {
		kids, _, w, err := c.ChildrenW(ctx, path)
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			if _, ok, w, err = c.ExistsW(ctx, path); err == nil && ok {
				continue // made meanwhile: list it
			}
		}
		if err != nil {
			return err
		}
		if len(kids) >= n {
			return nil
		}
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
