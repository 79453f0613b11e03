package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// consumeRecord counts each item's handle calls and calls done once every
// item has had one that returned nil.
type consumeRecord struct {
	mu      sync.Mutex
	calls   map[string]int
	handled map[string]int // calls that returned nil
	want    int
	done    func()
}

func newConsumeRecord(want int, done func()) *consumeRecord {
	return &consumeRecord{calls: map[string]int{}, handled: map[string]int{}, want: want, done: done}
}

// handle fails the first call of every tenth item (so it is nacked and
// comes again) and accepts every other call.
func (r *consumeRecord) handle(_ context.Context, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	item := string(data)
	r.calls[item]++
	var n int
	if _, err := fmt.Sscanf(item, "item-%d", &n); err == nil && n%10 == 0 && r.calls[item] == 1 {
		return errors.New("first try fails")
	}
	r.handled[item]++
	if len(r.handled) == r.want {
		r.done()
	}
	return nil
}

// offerNumbered offers n items item-<first>, item-<first+1>, ... (three
// digits).
func offerNumbered(t *testing.T, ctx context.Context, q *queue.Queue, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		offer(t, ctx, q, fmt.Sprintf("item-%03d", i))
	}
}

// Consume hands every item to handle, acks what handle accepted, nacks
// what it refused (the item comes again), returns nil when its ctx ends,
// and leaves no claim behind: the next item it claims in the multi of
// each ack is handled, or given back.
func TestConsume(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/consume"
		const items = 200
		prod := newQueue(t, c, path)
		offerNumbered(t, ctx, prod, 0, items)
		q := newQueue(t, tg.Connect(t), path)
		cctx, stop := context.WithCancel(ctx)
		rec := newConsumeRecord(items, stop)
		if err := q.Consume(cctx, rec.handle, queue.WithConcurrency(3)); err != nil {
			t.Fatalf("Consume = %v, want nil when its ctx ends", err)
		}
		for i := range items {
			item := fmt.Sprintf("item-%03d", i)
			wantCalls := 1
			if i%10 == 0 {
				wantCalls = 2
			}
			if rec.handled[item] != 1 || rec.calls[item] != wantCalls {
				t.Errorf("%s: %d calls, %d accepted; want %d and 1", item, rec.calls[item], rec.handled[item], wantCalls)
			}
		}
		drained(t, ctx, c, path)

		// A lone worker takes a lone producer's items in order.
		for i := range 50 {
			offer(t, ctx, prod, fmt.Sprintf("next-%03d", i))
		}
		cctx, stop = context.WithCancel(ctx)
		var order []string
		err := q.Consume(cctx, func(_ context.Context, data []byte) error {
			if order = append(order, string(data)); len(order) == 50 {
				stop()
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Consume = %v", err)
		}
		for i, item := range order {
			if want := fmt.Sprintf("next-%03d", i); item != want {
				t.Fatalf("item %d = %s, want %s: %v", i, item, want, order)
			}
		}
		drained(t, ctx, c, path)

		// Items left when ctx ends stay in the queue, unclaimed.
		offer(t, ctx, prod, "left-0", "left-1", "left-2")
		cctx, stop = context.WithCancel(ctx)
		if err := q.Consume(cctx, func(context.Context, []byte) error { stop(); return nil }); err != nil {
			t.Fatalf("Consume = %v", err)
		}
		kids := children(t, c, path)
		if len(kids) != 2 {
			t.Fatalf("left %v, want the two items not handled", kids)
		}
		for _, k := range kids {
			if _, ok, err := c.Exists(ctx, path+"/"+k+"/"+queue.ClaimName); err != nil || ok {
				t.Fatalf("%s is still claimed after Consume returned (%v)", k, err)
			}
		}

		q.Close()
		if err := q.Consume(ctx, rec.handle); !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("Consume after Close = %v, want ErrClosed", err)
		}
	})
}

// Consume goes on through its session's expiry: the items whose claims
// went with the session come again, and none is lost.
func TestConsumeThroughSessionExpiry(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/consume-expiry"
		const items = 300
		prod := newQueue(t, c, path)
		offerNumbered(t, ctx, prod, 1, items)
		cc := tg.Connect(t)
		q := newQueue(t, cc, path)
		cctx, stop := context.WithCancel(ctx)
		var (
			mu      sync.Mutex
			seen    = map[string]int{}
			expired bool
		)
		consumed := make(chan error, 1)
		go func() {
			consumed <- q.Consume(cctx, func(_ context.Context, data []byte) error {
				mu.Lock()
				defer mu.Unlock()
				if seen[string(data)]++; len(seen) == items {
					stop()
				}
				if len(seen) == items/3 && !expired {
					expired = true
					tg.Expire(t, cc) // with this item and the next one claimed
				}
				return nil
			}, queue.WithConcurrency(2))
		}()
		if err := <-consumed; err != nil {
			t.Fatalf("Consume = %v", err)
		}
		if !expired || len(seen) != items {
			t.Fatalf("expired %t, %d of %d items handled", expired, len(seen), items)
		}
		drained(t, ctx, c, path)
	})
}
