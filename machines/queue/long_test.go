package queue_test

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit"
)

// A queue of 70,000 items lists in one reply of about 1.1 MB, more than
// a Java client reads (jute.maxbuffer, 1 MiB): our consumer, whose
// go-zookeeper connection reads replies of any size, takes from it in
// order, and Len counts it without a listing. (The simulator has no
// packet limit, so this runs on the real server only.)
func TestQueueLongerThanAJavaPacket(t *testing.T) {
	tg := testkit.NewServerTarget(testkit.StartServer(t).Addr())
	ctx := ctxT(t)
	const path, n, batch = "/queue/long", 70_000, 1000
	producer := newQueue(t, tg.Connect(t), path)
	for b := 0; b < n; b += batch {
		items := make([][]byte, batch)
		for i := range items {
			items[i] = fmt.Append(nil, b+i)
		}
		if err := producer.OfferBatch(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	consumer := newQueue(t, tg.Connect(t), path)
	if l, err := consumer.Len(ctx); l != n || err != nil {
		t.Fatalf("Len = %d, %v; want %d", l, err, n)
	}
	for i := range 3 {
		if got := take(t, ctx, consumer); got != fmt.Sprint(i) {
			t.Fatalf("take %d = %q", i, got)
		}
	}
}
