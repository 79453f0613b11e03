package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/twophase"
)

// twophaseScenario: a coordinator and 3 participants (warehouse, payment,
// shipping), each with its own session. order-1 commits (every vote yes);
// order-2 aborts because payment votes no; during order-3 the
// coordinator crashes (on the simulator its session expires; on a server
// its connection closes) while shipping is still preparing, and the
// participants abort it themselves: no one waits for a dead coordinator,
// and every participant's handler sees the same outcome of every order.
func twophaseScenario(ctx context.Context, c *cluster, p *printer) error {
	defer p.flush()
	const root = "/demo/2pc"
	ids := []string{"warehouse", "payment", "shipping"}
	p.say("2pc: a coordinator and %d participants (%s) on %s, on %s", len(ids), strings.Join(ids, ", "), root, c.where)
	var printing sync.WaitGroup
	seen := &outcomes{m: map[string]map[string]string{}}
	shippingHolds := make(chan struct{}) // order-3's prepare at shipping waits on it
	sctx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	var serving sync.WaitGroup
	serveErrs := make([]error, len(ids))
	var parts []*twophase.Participant
	for i, id := range ids {
		conn, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		h := &demoHandler{id: id, seen: seen, hold: shippingHolds}
		part, err := twophase.NewParticipant(conn, root, id, h)
		if err != nil {
			return err
		}
		defer part.Close()
		parts = append(parts, part)
		p.follow(&printing, id, part.Subscribe())
		serving.Go(func() { serveErrs[i] = part.Serve(sctx) })
	}
	cconn, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cconn.Close()
	if err := twophase.WaitRegistered(ctx, cconn, root, ids...); err != nil {
		return err
	}
	coord, err := twophase.NewCoordinator(cconn, root, twophase.WithID("coordinator"), twophase.WithVoteTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer coord.Close()
	p.follow(&printing, "coordinator", coord.Subscribe())

	for _, tx := range []string{"order-1", "order-2"} {
		out, err := coord.Propose(ctx, tx, []byte(tx), ids)
		if err != nil {
			return fmt.Errorf("%s: %w", tx, err)
		}
		p.say("%s: %s", tx, describe(out))
	}
	// order-3: shipping holds its vote; the coordinator crashes meanwhile.
	type result struct {
		out twophase.Outcome
		err error
	}
	proposed := make(chan result, 1)
	go func() {
		out, err := coord.Propose(ctx, "order-3", []byte("order-3"), ids)
		proposed <- result{out, err}
	}()
	if err := seen.await(ctx, "warehouse", "order-3-prepared"); err != nil {
		return err
	}
	p.say("order-3: shipping is still preparing; the coordinator crashes: %s", p.crash(c, "coordinator", cconn))
	close(shippingHolds)
	// The crashed coordinator's Propose reads the decision the
	// participants made, or fails with its session.
	if r := <-proposed; r.err != nil {
		p.say("order-3: the crashed coordinator's Propose: %v", r.err)
	} else if r.out.Committed {
		return errors.New("order-3 committed without shipping's vote")
	} else {
		p.say("order-3: the crashed coordinator's Propose read the decision: %s", describe(r.out))
	}
	for _, id := range ids {
		for _, tx := range []string{"order-1", "order-2", "order-3"} {
			if err := seen.await(ctx, id, tx); err != nil {
				return err
			}
		}
	}
	stopServing()
	serving.Wait()
	for _, part := range parts {
		part.Close() // ends its subscription once every event is printed
	}
	coord.Close()
	printing.Wait()
	for i, err := range serveErrs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: Serve: %w", ids[i], err)
		}
	}
	p.say("2pc summary")
	for _, tx := range []string{"order-1", "order-2", "order-3"} {
		var per []string
		first := ""
		for _, id := range ids {
			o := seen.get(id, tx)
			per = append(per, id+" "+o)
			if first == "" {
				first = o
			}
			if o != first {
				return fmt.Errorf("%s: participants saw different outcomes: %v", tx, per)
			}
		}
		p.say("  %s: %s", tx, strings.Join(per, ", "))
	}
	switch {
	case seen.get("payment", "order-1") != "committed":
		return errors.New("order-1 did not commit")
	case !strings.HasPrefix(seen.get("payment", "order-2"), "aborted"):
		return errors.New("order-2 did not abort")
	case seen.get("payment", "order-3") != "aborted: "+twophase.ReasonCoordinatorGone:
		return fmt.Errorf("order-3: %s, want aborted: %s", seen.get("payment", "order-3"), twophase.ReasonCoordinatorGone)
	}
	return nil
}

func describe(o twophase.Outcome) string {
	if o.Committed {
		return "committed"
	}
	return "aborted: " + o.Reason
}

// demoHandler votes yes, except payment on order-2; shipping holds its
// order-3 vote until hold is closed. It records every outcome it sees.
type demoHandler struct {
	id   string
	seen *outcomes
	hold chan struct{}
}

func (h *demoHandler) Prepare(ctx context.Context, tx twophase.Tx) (bool, error) {
	h.seen.set(h.id, tx.ID+"-prepared", "yes")
	switch {
	case h.id == "payment" && tx.ID == "order-2":
		return false, errors.New("card declined")
	case h.id == "shipping" && tx.ID == "order-3":
		select {
		case <-h.hold:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return true, nil
}

func (h *demoHandler) Commit(_ context.Context, tx twophase.Tx) error {
	h.seen.set(h.id, tx.ID, "committed")
	return nil
}

func (h *demoHandler) Abort(_ context.Context, tx twophase.Tx, reason string) error {
	h.seen.set(h.id, tx.ID, "aborted: "+reason)
	return nil
}

// outcomes is what each participant's handler saw, by transaction.
type outcomes struct {
	mu      sync.Mutex
	m       map[string]map[string]string
	changed chan struct{}
}

func (o *outcomes) set(id, key, v string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m[id] == nil {
		o.m[id] = map[string]string{}
	}
	o.m[id][key] = v
	if o.changed != nil {
		close(o.changed)
		o.changed = nil
	}
}

func (o *outcomes) get(id, key string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[id][key]
}

// await waits until participant id recorded key.
func (o *outcomes) await(ctx context.Context, id, key string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		o.mu.Lock()
		_, ok := o.m[id][key]
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		ch := o.changed
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to see %s: %w", id, key, ctx.Err())
		}
	}
}
