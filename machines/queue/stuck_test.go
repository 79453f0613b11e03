package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Items left behind a consumer that never runs dry still reach it. A
// claims the first two items; B races A for the first, loses (it watches
// that claim from then on), and takes the next block. A closes, its
// claims go, and producers keep offering, so B always has items after its
// mark. B gets the first item again at once (it saw its claim go), and
// the second, which it never raced for, and the rest of their block once
// the second has stayed the oldest for a second: both as redeliveries
// (REDELIVERED), the second one too, although B never saw its claim.
// On the real server B takes slower than the producers offer, so it is
// never idle: without the rule for an item that stays the oldest, 31 of
// the items were left after 20 s. On the simulator B drains faster and
// idles, and the idle consumer's rule takes them too.
func TestItemsBehindAConsumerThatNeverRunsDry(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/queue/never-dry"
		const filled = 64 // two blocks
		prod := newQueue(t, tg.Connect(t), path)
		offerNumbered(t, ctx, prod, 1, filled)
		a := newQueue(t, tg.Connect(t), path)
		for _, want := range []string{"item-001", "item-002"} {
			it, err := a.TakeItem(ctx)
			if err != nil || string(it.Data()) != want {
				t.Fatalf("A's TakeItem: %v, %v; want %s", it, err, want)
			}
		}
		b := newQueue(t, tg.Connect(t), path)
		sub := b.Subscribe()
		takeAck := func() string {
			t.Helper()
			it, err := b.TakeItem(ctx)
			if err != nil {
				t.Fatalf("B's TakeItem: %v", err)
			}
			if err := it.Ack(ctx); err != nil {
				t.Fatalf("B's Ack: %v", err)
			}
			return string(it.Data())
		}
		if got := takeAck(); got != "item-033" {
			t.Fatalf("B took %s first; want item-033, the next block's first", got)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		pctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			for n := 0; pctx.Err() == nil; n++ {
				batch := make([][]byte, 10)
				for i := range batch {
					batch[i] = fmt.Appendf(nil, "more-%d-%d", n, i)
				}
				if err := prod.OfferBatch(pctx, batch); err != nil && pctx.Err() == nil {
					t.Errorf("OfferBatch: %v", err)
					return
				}
				select {
				case <-time.After(5 * time.Millisecond):
				case <-pctx.Done():
				}
			}
		})
		left := map[string]bool{}
		for i := 1; i <= filled; i++ {
			left[fmt.Sprintf("item-%03d", i)] = true
		}
		delete(left, "item-033")
		start := time.Now()
		for len(left) > 0 && time.Since(start) < 20*time.Second {
			delete(left, takeAck())
		}
		took := time.Since(start)
		stop()
		wg.Wait()
		if len(left) > 0 {
			t.Fatalf("after %v, %d of the first %d items not taken by B (producers still offering)", took, len(left), filled)
		}
		b.Close()
		again := map[string]bool{}
		for ev := range sub.C {
			if ev.Type == events.Redelivered {
				again[ev.Node[len(ev.Node)-13:]] = true
			}
		}
		for _, name := range []string{"qn-0000000000", "qn-0000000001"} {
			if !again[name] {
				t.Errorf("%s, claimed by A when it closed, reached B with no REDELIVERED (B's redeliveries: %v)", name, again)
			}
		}
		t.Logf("B took the %d filled items in %v", filled, took)
	})
}
