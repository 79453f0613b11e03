package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

const (
	propProducers = 4
	propConsumers = 4
	propItems     = 20_000
	propFaults    = 6 // consumer sessions expired, spread over the run
	propShards    = 4 // of TestPropertySharded's queue
	propKeys      = 5 // its keys (k0 to k4, on all 4 shards), every producer's items spread over them
)

// propKey is the key of a sharded property test's item n of a producer.
func propKey(n int) string { return fmt.Sprintf("k%d", n%propKeys) }

// itemNames lists the items produce offers: p<producer>-<n>, each
// producer's in the order offered.
func itemNames() []string {
	var names []string
	for p := range propProducers {
		for n := range propItems / propProducers {
			names = append(names, fmt.Sprintf("p%d-%05d", p, n))
		}
	}
	return names
}

// produce fills path with propItems items "p<producer>-<n>" from
// propProducers producers, each on its own session, in batches and single
// offers; on a queue of shards (opts), each item with OfferKey, key
// propKey(n).
func produce(t *testing.T, ctx context.Context, tg testkit.Target, path string, opts ...queue.Option) {
	var wg sync.WaitGroup
	for p := range propProducers {
		q := newQueue(t, tg.Connect(t), path, opts...)
		wg.Go(func() {
			per := propItems / propProducers
			for n := 0; n < per; {
				if len(opts) > 0 {
					if err := q.OfferKey(ctx, propKey(n), []byte(fmt.Sprintf("p%d-%05d", p, n))); err != nil {
						t.Error(err)
						return
					}
					n++
					continue
				}
				if n%500 == 0 { // one in every 500 alone, the rest in batches
					if err := q.Offer(ctx, []byte(fmt.Sprintf("p%d-%05d", p, n))); err != nil {
						t.Error(err)
						return
					}
					n++
					continue
				}
				var batch [][]byte
				for ; n < per && len(batch) < 49 && n%500 != 0; n++ {
					batch = append(batch, []byte(fmt.Sprintf("p%d-%05d", p, n)))
				}
				if err := q.OfferBatch(ctx, batch); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// drained waits until path has no child left, or each of its shards
// (WithShards, in opts). It reads the child count (one Exists) every few
// milliseconds: a child watch would list the whole queue at every change.
func drained(t *testing.T, ctx context.Context, c zk.Conn, path string, opts ...queue.Option) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	if len(opts) > 0 {
		for k := range propShards {
			drained(t, ctx, c, fmt.Sprintf("%s/shard-%d", path, k))
		}
		return
	}
	for {
		st, _, err := c.Exists(ctx, path)
		if err != nil {
			t.Fatalf("waiting for the queue to drain: %v", err)
		}
		if st.NumChildren == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			// What is left, for the report: each item and its claim.
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			kids, _, _ := c.Children(dctx, path)
			var left []string
			for _, k := range kids {
				cs, ok, _ := c.Exists(dctx, path+"/"+k+"/"+queue.ClaimName)
				data, _, _ := c.Get(dctx, path+"/"+k+"/"+queue.ClaimName)
				left = append(left, fmt.Sprintf("%s (claim: %t, owner %#x, data %q)", k, ok, cs.EphemeralOwner, data))
			}
			cancel()
			t.Fatalf("the queue did not drain: %d items left: %v", st.NumChildren, left)
		}
	}
}

// consumers opens propConsumers queue handles on path with opts, each on
// its own session, with the ids consumer-<i>.
func consumers(t *testing.T, tg testkit.Target, path string, opts ...queue.Option) ([]zk.Conn, []*queue.Queue) {
	var conns []zk.Conn
	var qs []*queue.Queue
	for i := range propConsumers {
		c := tg.Connect(t)
		conns = append(conns, c)
		qs = append(qs, newQueue(t, c, path, append(opts, queue.WithID(fmt.Sprint("consumer-", i)))...))
	}
	return conns, qs
}

// faulter expires a random consumer's session each time the deliveries
// pass the next of propFaults marks, spread over the run.
type faulter struct {
	t     *testing.T
	tg    testkit.Target
	conns []zk.Conn
	rng   *rand.Rand
	done  atomic.Int64 // deliveries so far
	kick  chan struct{}
	n     int
	late  int // late writes armed (on the simulator)
}

func newFaulter(t *testing.T, tg testkit.Target, conns []zk.Conn) *faulter {
	return &faulter{t: t, tg: tg, conns: conns, rng: rand.New(rand.NewPCG(1, 2)), kick: make(chan struct{}, 1)}
}

func (f *faulter) delivered() {
	if n := f.done.Add(1); n%(propItems/(propFaults+1)) == 0 {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

func (f *faulter) run(ctx context.Context) {
	for {
		select {
		case <-f.kick:
			if f.n == propFaults {
				continue
			}
			f.n++
			f.tg.Expire(f.t, f.conns[f.rng.IntN(len(f.conns))])
			if sim, ok := testkit.SimOf(f.tg); ok {
				// On the simulator, also a write of another consumer's
				// applied only after its connection's next read.
				op := []testkit.OpKind{testkit.OpCreate, testkit.OpDelete, testkit.OpMulti}[f.rng.IntN(3)]
				sim.LateNextWrite(f.conns[f.rng.IntN(len(f.conns))], op, "/")
				f.late++
			}
		case <-ctx.Done():
			return
		}
	}
}

// delivery is one item given to a consumer, and how it ended.
type delivery struct {
	consumer int
	node     string
	ack      error // Ack's (or Nack's) result
	nacked   bool
}

func (d delivery) String() string {
	verb := "ack"
	if d.nacked {
		verb = "nack"
	}
	return fmt.Sprintf("{consumer %d %s: %v}", d.consumer, verb, d.ack)
}

// propertyBudget bounds each property test: a real server's run on a
// loaded 2-core machine was three quarters through after three minutes.
const propertyBudget = 6 * time.Minute

// Acknowledged consumption under session expiry: every item is acked by
// at most one Ack that returned nil, and is gone at the end (an Ack whose
// reply was lost with the session says ErrUncertain: its item is gone,
// removed by it or, after a redelivery, by another consumer's ack); an
// item is delivered again only after a nack, a lost claim (ErrClaimLost)
// or such an uncertain ack; nothing is lost. Each consumer claims items in
// their order in the queue, but for those that came again (checkOrder).
func TestPropertyAcknowledged(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		propertyAcknowledged(t, tg, "/queue/property/ack")
	})
}

// The same on a queue of 4 shards, every item offered with OfferKey (5
// keys; the items of one producer and key in the order offered): what
// TestPropertyAcknowledged checks, and the Order promise per shard (see
// checkOrder): every item of a key comes from one shard, and each consumer
// claims each shard's items in their order there (the order offered), but
// for those that came again (REDELIVERED: after a nack or a claim gone
// with its session). So each consumer gets each key's items in the order
// offered, but for those. Across shards, no order is promised or checked.
func TestPropertySharded(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		propertyAcknowledged(t, tg, "/queue/property/sharded", queue.WithShards(propShards))
	})
}

// propertyAcknowledged runs TestPropertyAcknowledged on path, every handle
// with opts (a queue of shards: TestPropertySharded).
func propertyAcknowledged(t *testing.T, tg testkit.Target, path string, opts ...queue.Option) {
	ctx, cancel := context.WithTimeout(t.Context(), propertyBudget)
	defer cancel()
	conns, qs := consumers(t, tg, path, opts...)
	var subs []*events.Subscription
	for _, q := range qs {
		subs = append(subs, q.Subscribe())
	}
	f := newFaulter(t, tg, conns)
	var (
		mu         sync.Mutex
		deliveries = make(map[string][]delivery)
	)
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { f.run(cctx) })
	for i, q := range qs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 3))
			for {
				it, err := q.TakeItem(cctx)
				if err != nil {
					if cctx.Err() == nil {
						t.Errorf("consumer %d: TakeItem: %v", i, err)
					}
					return
				}
				// Recorded in the order of the claims, before the ack.
				nack := rng.IntN(100) == 0
				mu.Lock()
				ds := deliveries[string(it.Data())]
				k := len(ds)
				deliveries[string(it.Data())] = append(ds, delivery{consumer: i, node: it.Node(), nacked: nack})
				mu.Unlock()
				actx, done := context.WithTimeout(ctx, 30*time.Second)
				if nack {
					err = it.Nack(actx)
				} else {
					err = it.Ack(actx)
				}
				done()
				mu.Lock()
				deliveries[string(it.Data())][k].ack = err
				mu.Unlock()
				f.delivered()
			}
		})
	}
	produce(t, ctx, tg, path, opts...)
	drained(t, ctx, tg.Connect(t), path, opts...)
	stop()
	wg.Wait()
	hist := make([][]events.Event, len(qs))
	bad := int64(-1)
	for i, q := range qs {
		q.Close()
		hist[i] = eventsOf(subs[i])
		if _, b := checkOrder(t, i, hist[i]); bad < 0 {
			bad = b
		}
	}
	logBlock(t, hist, bad)

	var acked, uncertain, again int
	for _, item := range itemNames() {
		ds := deliveries[item]
		if len(ds) == 0 {
			t.Errorf("%s: never delivered", item)
			continue
		}
		// Every delivery but one ends with an ack that went through
		// (at most one), a nack, or a lost claim; each delivery after
		// the first is explained by one of the last two.
		ok, nacks, lost, maybe := 0, 0, 0, 0
		for k, d := range ds {
			switch {
			case d.ack == nil && !d.nacked:
				ok++
			case d.ack == nil:
				nacks++
			case errors.Is(d.ack, queue.ErrClaimLost):
				lost++
			case errors.Is(d.ack, queue.ErrUncertain) && !d.nacked:
				maybe++
			default:
				t.Errorf("%s: delivery %d to consumer %d: %v", item, k, d.consumer, d.ack)
			}
		}
		again += len(ds) - 1
		// An uncertain ack (ErrUncertain) went through, or the item
		// was delivered again and acked by another consumer.
		switch {
		case ok == 1 && len(ds)-1 <= nacks+lost+maybe:
			acked++
		case ok == 0 && maybe >= 1 && len(ds)-1 <= nacks+lost+maybe-1:
			uncertain++ // its ack's reply was lost with its session
		default:
			t.Errorf("%s: %d acks, %d uncertain acks, %d nacks, %d lost claims in %d deliveries: %v", item, ok, maybe, nacks, lost, len(ds), ds)
		}
	}
	if f.n != propFaults {
		t.Errorf("%d faults injected, want %d", f.n, propFaults)
	}
	if len(opts) > 0 {
		checkKeys(t, deliveries)
	}
	t.Logf("%d items: %d acked, %d whose ack's reply was lost with its session; %d deliveries again; %d sessions expired, %d late writes armed",
		propItems, acked, uncertain, again, f.n, f.late)
}

// checkKeys checks that every key's items (propKey) came from one shard,
// and that every shard had items.
func checkKeys(t *testing.T, deliveries map[string][]delivery) {
	t.Helper()
	shardOf := map[string]string{} // key → its shard
	used := map[string]bool{}
	for item, ds := range deliveries {
		var p, n int
		if _, err := fmt.Sscanf(item, "p%d-%d", &p, &n); err != nil {
			t.Fatalf("item %q: %v", item, err)
		}
		for _, d := range ds {
			shard := zk.Parent(d.node)
			used[shard] = true
			if s, ok := shardOf[propKey(n)]; !ok {
				shardOf[propKey(n)] = shard
			} else if s != shard {
				t.Errorf("%s (key %s) came from %s, the key's items before from %s", item, propKey(n), shard, s)
			}
		}
	}
	if len(used) != propShards {
		t.Errorf("items came from %d shards, want %d: %v", len(used), propShards, shardOf)
	}
}

// Plain takes under session expiry: every item is taken, and only once,
// except an item whose TAKEN event says ErrUncertain (the reply to its
// delete was lost), which may have been taken twice. Each consumer takes
// items in their order in the queue (checkOrder), so each producer's in
// the order offered.
func TestPropertyPlain(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx, cancel := context.WithTimeout(t.Context(), propertyBudget)
		defer cancel()
		const path = "/queue/property/plain"
		var conns []zk.Conn
		var qs []*queue.Queue
		var subs []*events.Subscription
		for range propConsumers {
			c := tg.Connect(t)
			conns = append(conns, c)
			q := newQueue(t, c, path)
			qs = append(qs, q)
			subs = append(subs, q.Subscribe())
		}
		f := newFaulter(t, tg, conns)
		var (
			mu    sync.Mutex
			taken = make(map[string]int)
			order = make([][]string, propConsumers) // per consumer, the items in the order its Takes returned them
		)
		cctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { f.run(cctx) })
		for i, q := range qs {
			wg.Go(func() {
				for {
					data, err := q.Take(cctx)
					if err != nil {
						if cctx.Err() == nil {
							t.Errorf("consumer %d: Take: %v", i, err)
						}
						return
					}
					mu.Lock()
					taken[string(data)]++
					order[i] = append(order[i], string(data))
					mu.Unlock()
					f.delivered()
				}
			})
		}
		produce(t, ctx, tg, path)
		drained(t, ctx, tg.Connect(t), path)
		// The last deletes are done; their Takes may not have returned yet
		// (stopping them now would put their items back): wait for them.
		tick := time.NewTicker(5 * time.Millisecond)
		for {
			mu.Lock()
			n := len(taken)
			mu.Unlock()
			if n == propItems {
				break
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				t.Errorf("the queue drained, and %d of %d items were returned by a Take", n, propItems)
			}
			if ctx.Err() != nil {
				break
			}
		}
		tick.Stop()
		stop()
		wg.Wait()
		uncertain := make(map[string]bool)
		hist := make([][]events.Event, len(qs))
		bad := int64(-1)
		for i, q := range qs {
			q.Close()
			hist[i] = eventsOf(subs[i])
			nodes, b := checkOrder(t, i, hist[i])
			for _, node := range nodes {
				uncertain[node] = true
			}
			if bad < 0 {
				bad = b
			}
		}
		logBlock(t, hist, bad)
		twice := 0
		for _, item := range itemNames() {
			switch k := taken[item]; {
			case k == 1:
			case k == 0:
				t.Errorf("%s: lost", item)
			case k == 2 && len(uncertain) > 0:
				twice++
			default:
				t.Errorf("%s: taken %d times", item, k)
			}
		}
		if twice > len(uncertain) {
			t.Errorf("%d items taken twice, and only %d uncertain removals", twice, len(uncertain))
		}
		if f.n != propFaults {
			t.Errorf("%d faults injected, want %d", f.n, propFaults)
		}
		if n := producerDescents(order); n > 0 {
			t.Errorf("%d items taken after a later one of their producer by the same consumer", n)
		}
		t.Logf("%d items taken; %d uncertain removals, %d items taken twice; %d sessions expired, %d late writes armed",
			propItems, len(uncertain), twice, f.n, f.late)
	})
}

// checkOrder checks a closed queue's events, evs, that the consumer took
// or claimed items in their order in the queue (in each shard: its
// directory): the items it took (TAKEN) and claimed (CLAIMED), except
// those that came again (REDELIVERED first) and those whose removal is
// uncertain (TAKEN with ErrUncertain), which it returns. bad is the first
// item out of order (-1: none).
func checkOrder(t *testing.T, consumer int, evs []events.Event) (uncertain []string, bad int64) {
	t.Helper()
	last, bad := map[string]int64{}, int64(-1) // per directory, the last item the consumer got
	again := ""
	for _, ev := range evs {
		switch {
		case ev.Type == events.Redelivered:
			again = ev.Node
			continue
		case ev.Type == events.Taken && errors.Is(ev.Err, queue.ErrUncertain):
			uncertain = append(uncertain, ev.Node)
			continue
		case ev.Type == events.Claimed && ev.Node == again:
			continue
		case ev.Type != events.Taken && ev.Type != events.Claimed:
			continue
		}
		dir := zk.Parent(ev.Node)
		if l, ok := last[dir]; ok && nodeSeq(t, ev.Node) < l {
			t.Errorf("consumer %d got %s after item %d", consumer, ev.Node, l)
			if bad < 0 {
				bad = nodeSeq(t, ev.Node)
			}
		} else {
			last[dir] = nodeSeq(t, ev.Node)
		}
	}
	return uncertain, bad
}

// eventsOf is what sub delivered until its queue was closed.
func eventsOf(sub *events.Subscription) []events.Event {
	var evs []events.Event
	for ev := range sub.C {
		evs = append(evs, ev)
	}
	return evs
}

// logBlock logs, when an item came out of order, what every consumer did
// with the items around it (the 32 before and after) and with its
// sessions: the history a failed order check needs.
func logBlock(t *testing.T, hist [][]events.Event, bad int64) {
	t.Helper()
	if bad < 0 {
		return
	}
	for i, evs := range hist {
		var lines []string
		for _, ev := range evs {
			near := false
			if len(ev.Node) >= 10 {
				var seq int64
				if _, err := fmt.Sscanf(ev.Node[len(ev.Node)-10:], "%d", &seq); err == nil {
					near = seq >= bad-32 && seq <= bad+32
				}
			}
			if near || ev.Node == "" && ev.Type != events.Start {
				lines = append(lines, ev.String())
			}
		}
		t.Logf("consumer %d, around item %d:\n%s", i, bad, strings.Join(lines, "\n"))
	}
}

// nodeSeq is the sequence number ending an item node's path.
func nodeSeq(t *testing.T, node string) int64 {
	t.Helper()
	var seq int64
	if len(node) < 10 {
		t.Fatalf("%q: not an item", node)
	}
	if _, err := fmt.Sscanf(node[len(node)-10:], "%d", &seq); err != nil {
		t.Fatalf("%q: not an item: %v", node, err)
	}
	return seq
}

// producerDescents counts, over every consumer, the items taken after a
// later item of the same producer (items "p<producer>-<n>").
func producerDescents(order [][]string) int {
	n := 0
	for _, items := range order {
		last := map[string]string{}
		for _, item := range items {
			p, _, _ := strings.Cut(item, "-")
			if l, ok := last[p]; ok && item < l {
				n++
				continue
			}
			last[p] = item
		}
	}
	return n
}

// Consume under session expiry, with 1 in 100 handle calls refusing its
// item: every item is accepted (its handle returned nil), none is lost,
// and the queue drains. An item is accepted twice only when the session
// of the consumer that first accepted it expired before its ack went
// through: at most one item per worker and expiry.
func TestPropertyConsume(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx, cancel := context.WithTimeout(t.Context(), propertyBudget)
		defer cancel()
		const path = "/queue/property/consume"
		const workers = 2
		conns, qs := consumers(t, tg, path)
		f := newFaulter(t, tg, conns)
		var (
			mu       sync.Mutex
			accepted = make(map[string]int)
			refused  int
		)
		cctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { f.run(cctx) })
		for i, q := range qs {
			rng := rand.New(rand.NewPCG(uint64(i), 4))
			wg.Go(func() {
				err := q.Consume(cctx, func(_ context.Context, data []byte) error {
					mu.Lock()
					defer mu.Unlock()
					if rng.IntN(100) == 0 {
						refused++
						return errors.New("refused")
					}
					accepted[string(data)]++
					f.delivered()
					return nil
				}, queue.WithConcurrency(workers))
				if err != nil {
					t.Errorf("consumer %d: Consume: %v", i, err)
				}
			})
		}
		produce(t, ctx, tg, path)
		drained(t, ctx, tg.Connect(t), path)
		stop()
		wg.Wait()
		twice := 0
		for _, item := range itemNames() {
			switch k := accepted[item]; {
			case k == 0:
				t.Errorf("%s: never accepted", item)
			case k > 1:
				twice += k - 1
			}
		}
		if twice > workers*f.n {
			t.Errorf("%d items accepted again, more than one per worker and expiry (%d expiries)", twice, f.n)
		}
		if f.n != propFaults {
			t.Errorf("%d faults injected, want %d", f.n, propFaults)
		}
		t.Logf("%d items accepted; %d handle calls refused; %d accepted again; %d sessions expired, %d late writes armed", propItems, refused, twice, f.n, f.late)
	})
}
