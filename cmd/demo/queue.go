package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/queue"
)

// queueScenario: a work queue with acknowledged consumption. consumer-3
// claims the first order and crashes while working on it (on the
// simulator its session expires; on a server its connection closes).
// Meanwhile 2 producers offer items orders each, and consumer-1 and
// consumer-2 (Consume: ack when the handler returns nil) work through
// them, passing over the order consumer-3 holds; they leave the rest of
// its block to it, and take it after a second in which consumer-3 takes
// none of it (the package doc's "Order"). When its session ends,
// its claim goes with it: the order is REDELIVERED to one of the two,
// which acks it. Every order is acked exactly once, and none is lost.
func queueScenario(ctx context.Context, c *cluster, p *printer, orders int, hold time.Duration) error {
	defer p.flush()
	const path = "/demo/queue"
	total := 2*orders + 1
	p.say("queue: 2 producers offer %d orders to %s, 3 consumers ack them; consumer-3 crashes mid-order, on %s", total, path, c.where)
	var printing sync.WaitGroup
	open := func(who string) (*queue.Queue, zk.Conn, error) {
		conn, err := c.connect(ctx)
		if err != nil {
			return nil, nil, err
		}
		q, err := queue.New(conn, path, queue.WithID(who))
		if err != nil {
			conn.Close()
			return nil, nil, err
		}
		p.follow(&printing, who, q.Subscribe())
		return q, conn, nil
	}
	var qs []*queue.Queue
	var conns []zk.Conn
	defer func() {
		for i := range qs {
			qs[i].Close()
			conns[i].Close()
		}
	}()
	for _, who := range []string{"producer-1", "producer-2", "consumer-1", "consumer-2", "consumer-3"} {
		q, conn, err := open(who)
		if err != nil {
			return fmt.Errorf("%s: %w", who, err)
		}
		qs, conns = append(qs, q), append(conns, conn)
	}
	producers, workers, crasher := qs[:2], qs[2:4], qs[4]

	// consumer-3 claims the first order and never acks it.
	if err := producers[0].Offer(ctx, []byte("order-0")); err != nil {
		return err
	}
	held, err := crasher.TakeItem(ctx)
	if err != nil {
		return fmt.Errorf("consumer-3: %w", err)
	}
	p.say("consumer-3 claimed %s (%s) and works on it", held.Data(), zk.Base(held.Node()))
	p.say("the others lose the race for it, so they leave its block (sequence numbers 0-31) to consumer-3: they take the block's upper half at once, and the orders left below it once consumer-3 has taken none of them for a second")

	// consumer-1 and consumer-2 consume; the producers offer.
	var mu sync.Mutex
	acks := map[string][]string{} // order → who acked it
	perWorker := make([]int, len(workers))
	done := make(chan struct{}, total)
	cctx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	consumeErrs := make([]error, len(workers))
	var consuming sync.WaitGroup
	for i, q := range workers {
		who := fmt.Sprintf("consumer-%d", i+1)
		consuming.Go(func() {
			consumeErrs[i] = q.Consume(cctx, func(ctx context.Context, data []byte) error {
				time.Sleep(hold) // the work done on the order
				mu.Lock()
				acks[string(data)] = append(acks[string(data)], who)
				perWorker[i]++
				mu.Unlock()
				done <- struct{}{}
				return nil
			})
		})
	}
	var offering sync.WaitGroup
	offerErrs := make([]error, len(producers))
	for i, q := range producers {
		offering.Go(func() {
			for n := range orders {
				if offerErrs[i] = q.Offer(ctx, fmt.Appendf(nil, "order-%d", 1+i+2*n)); offerErrs[i] != nil {
					return
				}
			}
		})
	}
	offering.Wait()
	if err := errors.Join(offerErrs...); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wait := func(n int, what string) error {
		for range n {
			select {
			case <-done:
			case <-wctx.Done():
				return fmt.Errorf("waiting for %s: %w", what, wctx.Err())
			}
		}
		return nil
	}
	if err := wait(total-1, "every order but consumer-3's"); err != nil {
		return err
	}
	p.say("every order but %s is acked; consumer-3 crashes: %s", held.Data(), p.crash(c, "consumer-3", conns[4]))
	if err := wait(1, string(held.Data())+" redelivered"); err != nil {
		return err
	}
	stopConsuming()
	consuming.Wait()
	for i, err := range consumeErrs {
		if err != nil {
			return fmt.Errorf("consumer-%d: %w", i+1, err)
		}
	}
	if err := held.Ack(ctx); !errors.Is(err, queue.ErrClaimLost) && !errors.Is(err, queue.ErrClosed) {
		return fmt.Errorf("consumer-3's ack after its crash = %v, want ErrClaimLost", err)
	}
	left, err := producers[0].Len(ctx)
	if err != nil {
		return err
	}

	for _, q := range qs {
		q.Close() // ends its subscription once every event is printed
	}
	printing.Wait()
	var twice, missing []string
	for n := range total {
		switch who := acks[fmt.Sprintf("order-%d", n)]; len(who) {
		case 0:
			missing = append(missing, fmt.Sprintf("order-%d", n))
		case 1:
		default:
			twice = append(twice, fmt.Sprintf("order-%d by %s", n, strings.Join(who, " and ")))
		}
	}
	p.say("queue summary")
	p.say("  orders acked: %d of %d; per consumer: consumer-1 %d, consumer-2 %d, consumer-3 0 (crashed holding %s)",
		len(acks), total, perWorker[0], perWorker[1], held.Data())
	p.say("  %s, redelivered after consumer-3's crash, acked by %s; items left in the queue: %d",
		held.Data(), strings.Join(acks[string(held.Data())], " and "), left)
	switch {
	case len(missing) > 0:
		return fmt.Errorf("orders never acked: %v", missing)
	case len(twice) > 0:
		return fmt.Errorf("orders acked more than once: %v", twice)
	case left != 0:
		return fmt.Errorf("%d items left in the queue", left)
	}
	return nil
}
