package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
)

// twophaseBench: one coordinator proposes -txs transactions in turn to
// -participants participants (one session each) whose handlers vote yes
// at once; commit_ms times each Propose. The next transaction starts once
// every participant has handled the last (its COMMITTED event), so that
// each Propose is timed on idle participants. Its floor, from raw round trips
// of the same run: the transaction's create (a multi), its notification
// to a participant, the vote's create and its notification to the
// coordinator, and the decision's create: 2 × create_notify_ms +
// create_ms.
func twophaseBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("twophase")
	participants := c.fs.Int("participants", 5, "participants: one session each, voting yes")
	txs := c.fs.Int("txs", 200, "transactions, one after another")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	if *participants < 1 || *txs < 1 {
		return nil, errors.New("-participants and -txs must be at least 1")
	}
	tg := c.target()
	var conns []zk.Conn
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	open := func() (zk.Conn, error) {
		cn, err := tg.connect(ctx)
		if err == nil {
			conns = append(conns, cn)
		}
		return cn, err
	}
	sctx, stop := context.WithCancel(ctx)
	var serving sync.WaitGroup
	defer func() {
		stop()
		serving.Wait()
	}()
	ids := make([]string, *participants)
	var subs []*events.Subscription
	for i := range ids {
		ids[i] = fmt.Sprintf("p%d", i)
		cn, err := open()
		if err != nil {
			return nil, err
		}
		p, err := twophase.NewParticipant(cn, c.path, ids[i], yesHandler{})
		if err != nil {
			return nil, err
		}
		defer p.Close()
		subs = append(subs, p.Subscribe(events.WithBuffer(4**txs)))
		serving.Go(func() { _ = p.Serve(sctx) })
	}
	cconn, err := open()
	if err != nil {
		return nil, err
	}
	if err := twophase.WaitRegistered(ctx, cconn, c.path, ids...); err != nil {
		return nil, err
	}
	coord, err := twophase.NewCoordinator(cconn, c.path, twophase.WithRetention(time.Second))
	if err != nil {
		return nil, err
	}
	defer coord.Close()
	// The floor's parts, on the same server, first: measured after the
	// transactions, they met the coordinator's janitor deleting the last
	// second's transactions, and read up to a third higher.
	raw := c.path + "-raw"
	if err := createParents(ctx, cconn, raw); err != nil {
		return nil, err
	}
	var create, notify []time.Duration
	for i := range *txs {
		t0 := time.Now()
		if _, err := cconn.Create(ctx, fmt.Sprintf("%s/c%d", raw, i), nil, zk.ModePersistent); err != nil {
			return nil, err
		}
		create = append(create, time.Since(t0))
		d, err := timeCreateNotify(ctx, cconn, conns[0], fmt.Sprintf("%s/n%d", raw, i))
		if err != nil {
			return nil, err
		}
		notify = append(notify, d)
	}
	if err := deleteTree(ctx, cconn, raw); err != nil {
		fmt.Fprintf(os.Stderr, "zkbench twophase: cleanup %s: %v\n", raw, err)
	}
	var commit []time.Duration
	errs := []string{}
	aborted := 0
	for i := range *txs {
		t0 := time.Now()
		out, err := coord.Propose(ctx, fmt.Sprintf("tx%d", i), []byte("payload"), ids)
		if err != nil {
			errs = append(errs, fmt.Sprintf("tx%d: %v", i, err))
			break
		}
		commit = append(commit, time.Since(t0))
		if !out.Committed {
			aborted++
		}
		if err := awaitHandled(ctx, subs); err != nil {
			errs = append(errs, fmt.Sprintf("tx%d: %v", i, err))
			break
		}
	}
	floor := 2*median(notify) + median(create)
	var perFloor float64
	if len(commit) > 0 && floor > 0 {
		perFloor = round(float64(median(commit))/float64(floor), 2)
	}
	params := obj{{"participants", *participants}, {"txs", *txs}, {"session_ms", c.session.Milliseconds()}, {"path", c.path}}
	return append(c.header("twophase", params),
		field{"participants", *participants}, field{"txs", len(commit)}, field{"aborted", aborted},
		field{"commit_ms", summary(commit, millis)},
		field{"create_ms", summary(create, millis)}, field{"create_notify_ms", summary(notify, millis)},
		field{"floor_ms", round(float64(floor)/float64(time.Millisecond), 3)},
		field{"commit_p50_per_floor", perFloor},
		field{"errors", errs}, field{"ok", len(errs) == 0 && aborted == 0 && len(commit) == *txs},
	), nil
}

// yesHandler votes yes and applies nothing.
type yesHandler struct{}

func (yesHandler) Prepare(context.Context, twophase.Tx) (bool, error) { return true, nil }
func (yesHandler) Commit(context.Context, twophase.Tx) error          { return nil }
func (yesHandler) Abort(context.Context, twophase.Tx, string) error   { return nil }

// awaitHandled waits for one COMMITTED or ABORTED event of each
// subscription.
func awaitHandled(ctx context.Context, subs []*events.Subscription) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, sub := range subs {
		for done := false; !done; {
			select {
			case ev := <-sub.C:
				done = ev.Type == events.Committed || ev.Type == events.Aborted
			case <-ctx.Done():
				return fmt.Errorf("waiting for the participants to handle it: %w", ctx.Err())
			}
		}
	}
	return nil
}
