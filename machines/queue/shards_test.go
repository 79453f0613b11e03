package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A queue with 4 shards: the path records 4; Offer goes round-robin over
// shard-0 to shard-3; OfferKey sends a key's items to one shard; Len
// counts every shard; a consumer empties them all (Take, TakeItem, Poll),
// each shard's items in their order; Peek and Poll say ErrEmpty once all
// are empty; a handle with another number of shards, an unsharded one
// included, gets ErrShardsMismatch, sending nothing.
func TestShards(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/shards/four"
		q := newQueue(t, c, path, queue.WithShards(4))
		offer(t, ctx, q, "a", "b", "c", "d", "e")
		if data, _, err := c.Get(ctx, path); err != nil || string(data) != "4" {
			t.Fatalf("the path's data = %q, %v; want 4", data, err)
		}
		for k, want := range []int{2, 1, 1, 1} {
			if kids := children(t, c, fmt.Sprintf("%s/shard-%d", path, k)); len(kids) != want {
				t.Fatalf("shard-%d holds %v, want %d items (round-robin)", k, kids, want)
			}
		}
		for i := range 3 {
			if err := q.OfferKey(ctx, "k", []byte(fmt.Sprintf("k%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := q.Len(ctx); n != 8 || err != nil {
			t.Fatalf("Len = %d, %v; want 8", n, err)
		}
		for _, opt := range []queue.Option{queue.WithShards(2), nil} {
			other := newQueue(t, tg.Connect(t), path, opt)
			if _, err := other.Poll(ctx); !errors.Is(err, queue.ErrShardsMismatch) {
				t.Fatalf("Poll of a handle with another number of shards = %v, want ErrShardsMismatch", err)
			}
			if err := other.Offer(ctx, []byte("x")); !errors.Is(err, queue.ErrShardsMismatch) {
				t.Fatalf("Offer of a handle with another number of shards = %v, want ErrShardsMismatch", err)
			}
		}
		var got []string
		for range 4 {
			got = append(got, take(t, ctx, q))
		}
		for range 2 {
			it, err := q.TakeItem(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := it.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			got = append(got, string(it.Data()))
		}
		for range 2 {
			data, err := q.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(data))
		}
		if k := strings.Join(filter(got, "k"), ","); k != "k0,k1,k2" {
			t.Fatalf("took %v: the key's items %s, want k0,k1,k2 in order", got, k)
		}
		if len(got) != 8 || !containsAll(got, "a", "b", "c", "d", "e") {
			t.Fatalf("took %v, want every item once", got)
		}
		if _, err := q.Poll(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("Poll of an empty sharded queue = %v, want ErrEmpty", err)
		}
		if _, err := q.Peek(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("Peek of an empty sharded queue = %v, want ErrEmpty", err)
		}
		if n, err := q.Len(ctx); n != 0 || err != nil {
			t.Fatalf("Len = %d, %v; want 0", n, err)
		}
	})
}

// A Take on an empty sharded queue waits on every shard: an item offered
// to any shard reaches it.
func TestShardedTakeWaits(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/queue/shards/wait"
		q := newQueue(t, tg.Connect(t), path, queue.WithShards(3), queue.WithID("consumer"))
		sub := q.Subscribe()
		defer sub.Close()
		prod := newQueue(t, tg.Connect(t), path, queue.WithShards(3))
		for _, item := range []string{"a", "b", "c"} {
			got := make(chan string, 1)
			go func() {
				data, err := q.Take(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- string(data)
			}()
			offer(t, ctx, prod, item)
			if g := <-got; g != item {
				t.Fatalf("Take = %q, want %s", g, item)
			}
			testkit.WaitEvent(t, sub, events.Taken) // the shards' events reach the handle's subscribers
		}
	})
}

// 4 producers offer keyed items (OfferKey: a key per producer) to a
// 4-shard queue and 4 consumers take them with TakeItem and Ack: every
// item is acked once, and each consumer gets each key's items in the
// order offered.
func TestShardedProducersAndConsumers(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path, producers, consumersN, per = "/queue/shards/many", 4, 4, 200
		var wg sync.WaitGroup
		for p := range producers {
			q := newQueue(t, tg.Connect(t), path, queue.WithShards(4))
			wg.Go(func() {
				for n := range per {
					if err := q.OfferKey(ctx, fmt.Sprint(p), []byte(fmt.Sprintf("%d-%04d", p, n))); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		var mu sync.Mutex
		acked := map[string]int{}
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		for i := range consumersN {
			q := newQueue(t, tg.Connect(t), path, queue.WithShards(4), queue.WithID(fmt.Sprint("consumer-", i)))
			wg.Go(func() {
				last := map[string]string{} // per key, the last item this consumer got
				for {
					it, err := q.TakeItem(cctx)
					if err != nil {
						return
					}
					item := string(it.Data())
					key := item[:1]
					if item <= last[key] {
						t.Errorf("consumer %d got %s after %s", i, item, last[key])
					}
					last[key] = item
					if err := it.Ack(ctx); err != nil {
						t.Error(err)
					}
					mu.Lock()
					if acked[item]++; len(acked) == producers*per {
						stop()
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for p := range producers {
			for n := range per {
				if item := fmt.Sprintf("%d-%04d", p, n); acked[item] != 1 {
					t.Errorf("%s acked %d times", item, acked[item])
				}
			}
		}
	})
}

func filter(items []string, prefix string) []string {
	var out []string
	for _, it := range items {
		if strings.HasPrefix(it, prefix) {
			out = append(out, it)
		}
	}
	return out
}

func containsAll(items []string, want ...string) bool {
	for _, w := range want {
		if len(filter(items, w)) != 1 {
			return false
		}
	}
	return true
}
