package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Calls whose ctx ends at any moment, and so at the moment their answer
// comes, lose nothing: an item taken for a call whose caller had just
// given up is put back, a claim made for one is given back, and every
// item is delivered. Four consumers (two taking, two taking and acking)
// make 150 calls each with timeouts spread around their round trip; then
// they close, and one more consumer drains the queue.
func TestCallsCancelledAtRandomLoseNothing(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/queue/cancel/random"
		const n, calls = 300, 150
		pc := tg.Connect(t)
		producer := newQueue(t, pc, path)
		items := make([][]byte, n)
		for i := range items {
			items[i] = fmt.Appendf(nil, "item-%03d", i)
		}
		if err := producer.OfferBatch(ctx, items); err != nil {
			t.Fatal(err)
		}
		// Up to a few times a call's cost on the simulator (under -race)
		// and a round trip on a real server: many calls end while their
		// answer is on its way.
		span := 400 * time.Microsecond
		if tg.Name() != "sim" {
			span = 2 * time.Millisecond
		}
		var mu sync.Mutex
		got := map[string]int{}
		deliver := func(d []byte) {
			mu.Lock()
			got[string(d)]++
			mu.Unlock()
		}
		var wg sync.WaitGroup
		for w := range 4 {
			q, err := queue.New(tg.Connect(t), path)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer q.Close() // gives back what it still holds
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				timeout := func() (context.Context, context.CancelFunc) {
					return context.WithTimeout(ctx, time.Duration(rng.Int64N(int64(span))))
				}
				for range calls {
					cctx, cancel := timeout()
					if w%2 == 0 {
						if d, err := q.Take(cctx); err == nil {
							deliver(d)
						}
						cancel()
						continue
					}
					it, err := q.TakeItem(cctx)
					cancel()
					if err != nil {
						continue
					}
					deliver(it.Data())
					// The ack's ctx ends at random too: unless the ack
					// went through, the item is delivered again.
					actx, cancel := timeout()
					if err := it.Ack(actx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Ack: %v", err)
					}
					cancel()
				}
			}()
		}
		wg.Wait()
		drain := newQueue(t, tg.Connect(t), path)
		for {
			d, err := drain.Poll(ctx)
			if errors.Is(err, queue.ErrEmpty) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			deliver(d)
		}
		var lost []string
		for _, it := range items {
			if got[string(it)] == 0 {
				lost = append(lost, string(it))
			}
		}
		if len(lost) > 0 {
			t.Fatalf("%d of %d items never delivered: %v", len(lost), n, lost)
		}
		nothingLeft(t, pc, path)
	})
}
