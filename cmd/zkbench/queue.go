package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/queue"
)

// queueBench is the peers' QueueBench: the producers (one session and
// queue handle each) offer every item, then the consumers (the same) take
// them all. Items carry their number, so the consumers' order is checked:
// fifo is true when every item arrived once and each consumer took each
// producer's items in the order offered (priority: lower priority first,
// then in the order offered). raw_create_us and
// raw_delete_us time -raw sequential creates and deletes of persistent
// sequential nodes on the first producer's session, before the items and
// again after them: an offer costs at least one create and a take one
// delete, in this run, on this server. With -kind ack, raw_claim_us and
// raw_ack_us time the two writes TakeItem and Ack are made of, done by
// hand as often, in turn with those deletes: an ephemeral "claim" child
// created under a fresh item node, then the multi deleting both. With
// -shards above 1 the queue has that many shards (queue.WithShards), and
// the producers offer with OfferKey, item g with key g%keys: order is
// checked per producer and key, as promised (none across shards).
func queueBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("queue")
	kind := c.fs.String("kind", "fifo", "fifo (Take) | ack (TakeItem, then Ack) | consume (Consume, which acks) | priority (OfferPriority, then Take)")
	producers := c.fs.Int("producers", 1, "producers: one session, one queue handle and one goroutine each")
	consumers := c.fs.Int("consumers", 1, "consumers: one session, one queue handle and one goroutine each")
	items := c.fs.Int("items", 2000, "items offered and taken")
	batch := c.fs.Int("batch", 1, "items per offer (OfferBatch when above 1; not with -kind priority)")
	payload := c.fs.Int("payload", 32, "item size in bytes (at least 10)")
	warmup := c.fs.Int("warmup-items", 200, "unmeasured offer and take round first")
	raw := c.fs.Int("raw", 500, "raw creates and deletes timed before the items and again after them")
	shards := c.fs.Int("shards", 1, "the queue's shards (queue.WithShards); above 1, items are offered with OfferKey")
	keys := c.fs.Int("keys", 64, "with -shards above 1: item g is offered with key g%keys")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	switch {
	case *kind != "fifo" && *kind != "ack" && *kind != "consume" && *kind != "priority":
		return nil, fmt.Errorf("-kind %q: want fifo, ack, consume or priority", *kind)
	case *producers < 1 || *consumers < 1:
		return nil, errors.New("-producers and -consumers must be at least 1")
	case *items < 1:
		return nil, errors.New("-items must be at least 1")
	case *batch < 1 || (*batch > 1 && *kind == "priority"):
		return nil, errors.New("-batch must be at least 1, and 1 with -kind priority")
	case *payload < 10:
		return nil, errors.New("-payload must be at least 10")
	case *raw < 1:
		return nil, errors.New("-raw must be at least 1")
	case *shards < 1 || *keys < 1:
		return nil, errors.New("-shards and -keys must be at least 1")
	case *shards > 1 && (*batch > 1 || *kind == "priority"):
		return nil, errors.New("-shards above 1 offers with OfferKey: not with -batch above 1 or -kind priority")
	}
	tg := c.target()
	var conns []zk.Conn
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	open := func(n int, role string) ([]*queue.Queue, error) {
		qs := make([]*queue.Queue, n)
		for i := range qs {
			cn, err := tg.connect(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s %d: %w", role, i, err)
			}
			conns = append(conns, cn)
			if qs[i], err = queue.New(cn, c.path, queue.WithID(fmt.Sprintf("%s-%d", role, i)), queue.WithShards(*shards)); err != nil {
				return nil, err
			}
		}
		return qs, nil
	}
	prods, err := open(*producers, "producer")
	if err != nil {
		return nil, err
	}
	cons, err := open(*consumers, "consumer")
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, q := range append(prods, cons...) {
			q.Close()
		}
	}()

	withAck := *kind == "ack"
	rawW, err := rawWrites(ctx, conns[0], c.path+"-raw", *raw, withAck)
	if err != nil {
		return nil, fmt.Errorf("raw writes: %w", err)
	}
	run := queueRun{kind: *kind, producers: prods, consumers: cons, batch: *batch, payload: *payload}
	if *shards > 1 {
		run.keys = *keys
	}
	if *warmup > 0 {
		if _, err := run.offer(ctx, *warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if err := run.take(ctx, *warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	run.reset()
	offerS, err := run.offer(ctx, *items)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	takeErr := run.take(ctx, *items)
	takeS := time.Since(start).Seconds()
	// The server's write latency drifts over a run: time as many raw
	// writes again after the takes, and compare with both.
	rawW2, err := rawWrites(ctx, conns[0], c.path+"-raw", *raw, withAck)
	if err != nil {
		return nil, fmt.Errorf("raw writes after the takes: %w", err)
	}
	rawW.add(rawW2)
	rawCreate, rawDelete := rawW.create, rawW.del

	errs := []string{}
	if takeErr != nil {
		errs = append(errs, takeErr.Error())
	}
	received, outOfOrder, dups := run.check(*items)
	left := nodesLeft(ctx, conns[0], c.path)
	if *shards > 1 {
		left = 0
		for k := range *shards {
			left += nodesLeft(ctx, conns[0], fmt.Sprintf("%s/shard-%d", c.path, k))
		}
	}
	if err := deleteTree(ctx, conns[0], c.path); err != nil {
		fmt.Fprintf(os.Stderr, "zkbench queue: cleanup %s: %v\n", c.path, err)
	}
	var takePerS any
	if takeS > 0 && received > 0 {
		takePerS = round(float64(received)/takeS, 1)
	}
	out := append(c.header("queue", obj{{"kind", *kind}, {"producers", *producers}, {"consumers", *consumers},
		{"items", *items}, {"batch", *batch}, {"payload", *payload}, {"warmup_items", *warmup}, {"raw", *raw},
		{"shards", *shards}, {"keys", run.keys}, {"session_ms", c.session.Milliseconds()}, {"path", c.path}}),
		field{"queue", *kind}, field{"items", *items},
		field{"offer_per_s", round(float64(*items)/offerS, 1)}, field{"take_per_s", takePerS},
		field{"offer_us", summary(run.offerLat, micros)}, field{"take_us", summary(run.takeLat, micros)})
	if withAck {
		floor := median(rawW.claim) + median(rawW.ack)
		out = append(out, field{"ack_us", summary(run.ackLat, micros)},
			field{"raw_claim_us", summary(rawW.claim, micros)}, field{"raw_ack_us", summary(rawW.ack, micros)},
			// The two raw writes' p50s over a raw delete's: the floor of
			// take+ack / delete on this server.
			field{"raw_claim_ack_p50_per_delete_p50", round(float64(floor)/float64(median(rawDelete)), 2)},
			field{"take_ack_p50_per_raw_claim_ack_p50", round(float64(median(run.takeLat)+median(run.ackLat))/float64(floor), 2)})
	}
	return append(out,
		field{"raw_create_us", summary(rawCreate, micros)}, field{"raw_delete_us", summary(rawDelete, micros)},
		field{"offer_p50_per_create_p50", round(ratio(run.offerLat, rawCreate), 2)},
		field{"take_p50_per_delete_p50", round(ratio(run.takeLat, rawDelete), 2)},
		field{"received", received}, field{"duplicates", dups}, field{"out_of_order", outOfOrder},
		field{"fifo", received == *items && dups == 0 && outOfOrder == 0},
		field{"errors", errs}, field{"ok", len(errs) == 0 && received == *items && dups == 0},
		field{"nodes_left", left},
	), nil
}

// queueRun is one bench's producers and consumers and what they measured.
type queueRun struct {
	kind            string
	producers       []*queue.Queue
	consumers       []*queue.Queue
	batch, payload  int
	keys            int // above 0: offers with OfferKey, item g with key g%keys
	mu              sync.Mutex
	offerLat        []time.Duration // per Offer or OfferBatch call
	takeLat, ackLat []time.Duration // per item
	taken           [][]int         // per consumer: item numbers in the order taken
}

func (r *queueRun) reset() {
	r.offerLat, r.takeLat, r.ackLat, r.taken = nil, nil, nil, nil
}

// prio is item n's priority with -kind priority: 10 levels, interleaved.
func prio(n int) int { return n * 7 % 10 }

// offer offers items numbered 0..n-1, item g by producer g%P, each
// producer in increasing order, and returns the seconds it took.
func (r *queueRun) offer(ctx context.Context, n int) (float64, error) {
	P := len(r.producers)
	errs := make([]error, P)
	lats := make([][]time.Duration, P)
	start := time.Now()
	var wg sync.WaitGroup
	for p, q := range r.producers {
		wg.Go(func() {
			var chunk [][]byte
			flush := func() error {
				t0 := time.Now()
				var err error
				switch {
				case r.kind == "priority":
					err = q.OfferPriority(ctx, chunk[0], prio(itemNumber(chunk[0])))
				case r.keys > 0:
					err = q.OfferKey(ctx, strconv.Itoa(itemNumber(chunk[0])%r.keys), chunk[0])
				case len(chunk) == 1:
					err = q.Offer(ctx, chunk[0])
				default:
					err = q.OfferBatch(ctx, chunk)
				}
				lats[p] = append(lats[p], time.Since(t0))
				chunk = nil
				return err
			}
			for g := p; g < n; g += P {
				chunk = append(chunk, itemData(g, r.payload))
				if len(chunk) == r.batch {
					if errs[p] = flush(); errs[p] != nil {
						return
					}
				}
			}
			if len(chunk) > 0 {
				errs[p] = flush()
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	for _, l := range lats {
		r.offerLat = append(r.offerLat, l...)
	}
	return secs, errors.Join(errs...)
}

// take has the consumers take n items between them, each waiting at most
// 30s for one: they take until n items are taken, and the takes still
// waiting then are called off (a take called off loses nothing). Each
// consumer keeps taking to the end, as a consumer that serves a queue
// does: one that stopped at a share of the items fixed beforehand would
// leave the rest of its block behind the others (see the package queue's
// Order).
func (r *queueRun) take(ctx context.Context, n int) error {
	if r.kind == "consume" {
		return r.consume(ctx, n)
	}
	ctx, done := context.WithCancel(ctx)
	defer done()
	var got atomic.Int64
	errs := make([]error, len(r.consumers))
	taken := make([][]int, len(r.consumers))
	var wg sync.WaitGroup
	for i, q := range r.consumers {
		wg.Go(func() {
			var takeLat, ackLat []time.Duration
			defer func() {
				r.mu.Lock()
				r.takeLat, r.ackLat = append(r.takeLat, takeLat...), append(r.ackLat, ackLat...)
				r.mu.Unlock()
			}()
			for got.Load() < int64(n) {
				tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				var data []byte
				var err error
				if r.kind == "ack" {
					var it *queue.Item
					if it, err = q.TakeItem(tctx); err == nil {
						t1 := time.Now()
						// The ack is not called off: the item is taken.
						data, err = it.Data(), it.Ack(context.WithoutCancel(tctx))
						ackLat = append(ackLat, time.Since(t1))
						takeLat = append(takeLat, t1.Sub(t0))
					}
				} else if data, err = q.Take(tctx); err == nil {
					takeLat = append(takeLat, time.Since(t0))
				}
				cancel()
				switch {
				case err != nil && ctx.Err() != nil && got.Load() >= int64(n):
					return // called off: every item is taken
				case err != nil:
					errs[i] = fmt.Errorf("consumer %d after %d items: %w", i, len(taken[i]), err)
					return
				}
				taken[i] = append(taken[i], itemNumber(data))
				if got.Add(1) >= int64(n) {
					done()
				}
			}
		})
	}
	wg.Wait()
	r.taken = taken
	return errors.Join(errs...)
}

// consume has each consumer run Consume (one item at a time) until n items
// are handled between them. An item's take_us is the time from the
// consumer's previous handle call's return (or the start) to this one's
// call: its claim, and the ack of the item before it, which Consume sends
// together.
func (r *queueRun) consume(ctx context.Context, n int) error {
	ctx, stop := context.WithTimeout(ctx, 5*time.Minute)
	defer stop()
	var left atomic.Int64
	left.Store(int64(n))
	errs := make([]error, len(r.consumers))
	taken := make([][]int, len(r.consumers))
	var wg sync.WaitGroup
	for i, q := range r.consumers {
		wg.Go(func() {
			var takeLat []time.Duration
			last := time.Now()
			errs[i] = q.Consume(ctx, func(_ context.Context, data []byte) error {
				takeLat = append(takeLat, time.Since(last))
				taken[i] = append(taken[i], itemNumber(data))
				if left.Add(-1) == 0 {
					stop()
				}
				last = time.Now()
				return nil
			})
			r.mu.Lock()
			r.takeLat = append(r.takeLat, takeLat...)
			r.mu.Unlock()
		})
	}
	wg.Wait()
	r.taken = taken
	if left.Load() > 0 {
		errs = append(errs, fmt.Errorf("%d items not consumed in 5 minutes", left.Load()))
	}
	return errors.Join(errs...)
}

// check counts the items received, those received more than once, and
// those a consumer took before an item it should have taken first: one
// of the same producer (and priority, or key) offered before it.
func (r *queueRun) check(n int) (received, outOfOrder, duplicates int) {
	P := len(r.producers)
	seen := make([]bool, n)
	for _, took := range r.taken {
		last := map[int]int{} // producer (and priority) → its last item number
		lastPrio := -1
		for _, g := range took {
			if g < 0 || g >= n || seen[g] {
				duplicates++
				continue
			}
			seen[g] = true
			received++
			key := g % P
			if r.keys > 0 {
				key = g%P*r.keys + g%r.keys
			}
			if r.kind == "priority" {
				if prio(g) < lastPrio {
					outOfOrder++
				}
				lastPrio, key = prio(g), prio(g)*P+g%P
			}
			if l, ok := last[key]; ok && g < l {
				outOfOrder++
			}
			last[key] = g
		}
	}
	return received, outOfOrder, duplicates
}

// itemData is item g: its number in 10 digits, then x up to size bytes.
func itemData(g, size int) []byte {
	b := make([]byte, size)
	copy(b, fmt.Sprintf("%010d", g))
	for i := 10; i < size; i++ {
		b[i] = 'x'
	}
	return b
}

func itemNumber(data []byte) int {
	if len(data) < 10 {
		return -1
	}
	g, err := strconv.Atoi(string(data[:10]))
	if err != nil {
		return -1
	}
	return g
}

// rawTimes are the durations of raw writes, one per write.
type rawTimes struct {
	create, del []time.Duration
	claim, ack  []time.Duration // with ack: a claim's create, an ack's multi
}

func (r *rawTimes) add(o rawTimes) {
	r.create, r.del = append(r.create, o.create...), append(r.del, o.del...)
	r.claim, r.ack = append(r.claim, o.claim...), append(r.ack, o.ack...)
}

// rawWrites times n sequential creates of persistent sequential nodes in
// dir, then n deletes of them, and deletes dir. With ack, each delete is
// followed by a claim and an ack done by hand on one more such node: the
// create of its ephemeral claim child, then the multi deleting both.
func rawWrites(ctx context.Context, c zk.Conn, dir string, n int, ack bool) (r rawTimes, err error) {
	if err := createParents(ctx, c, dir); err != nil {
		return r, err
	}
	data := make([]byte, 32)
	names := make([]string, n)
	for i := range n {
		t0 := time.Now()
		if names[i], err = c.Create(ctx, dir+"/"+queue.Prefix, data, zk.ModePersistentSequential); err != nil {
			return r, err
		}
		r.create = append(r.create, time.Since(t0))
	}
	var acked []string
	if ack {
		acked = make([]string, n)
		for i := range n { // untimed: the items the claims are made on
			if acked[i], err = c.Create(ctx, dir+"/"+queue.Prefix, data, zk.ModePersistentSequential); err != nil {
				return r, err
			}
		}
	}
	for i, name := range names {
		t0 := time.Now()
		if err := c.Delete(ctx, name, zk.AnyVersion); err != nil {
			return r, err
		}
		r.del = append(r.del, time.Since(t0))
		if !ack {
			continue
		}
		claim := zk.Join(acked[i], queue.ClaimName)
		t0 = time.Now()
		if _, err := c.Create(ctx, claim, data, zk.ModeEphemeral); err != nil {
			return r, err
		}
		r.claim = append(r.claim, time.Since(t0))
		t0 = time.Now()
		if _, err := c.Multi(ctx, &zk.DeleteOp{Path: claim, Version: zk.AnyVersion}, &zk.DeleteOp{Path: acked[i], Version: zk.AnyVersion}); err != nil {
			return r, err
		}
		r.ack = append(r.ack, time.Since(t0))
	}
	return r, deleteTree(ctx, c, dir)
}

// ratio is a's median over b's.
func ratio(a, b []time.Duration) float64 {
	if len(a) == 0 || len(b) == 0 || median(b) == 0 {
		return 0
	}
	return float64(median(a)) / float64(median(b))
}
