package queue_test

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/benchzk"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// One consumer's Take against the bare delete it costs at least, each on
// its own standalone server with forceSync on (as the peers' benchmarks
// run it), and Take on the simulator, where the server costs nothing: what
// is left there is the recipe's own cost per item (the hand-offs between
// the caller, the actor and the request goroutines, and the machine).
// Read the ratios of the ns/op from one run:
//
//	go test ./machines/queue -run '^$' -bench .
//
// cmd/zkbench queue times the same take and delete on one server, in one
// run, which is what the README's figures come from.

// benchItems are offered per OfferBatch while the items to take are laid
// down, before timing starts.
const benchItems = 500

// benchTake times b.N Takes of items offered before the timer starts.
func benchTake(b *testing.B, c zk.Conn) {
	ctx := b.Context()
	q, err := queue.New(c, "/bench/queue")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	batch := make([][]byte, benchItems)
	for i := range batch {
		batch[i] = fmt.Appendf(nil, "item-%06d-payload-32-bytes-long", i)
	}
	for left := b.N; left > 0; left -= benchItems {
		if err := q.OfferBatch(ctx, batch[:min(left, benchItems)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := q.Take(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTake(b *testing.B) { benchTake(b, benchzk.Conn(b)) }

func BenchmarkTakeSim(b *testing.B) {
	sim := testkit.NewSim()
	b.Cleanup(sim.Close)
	benchTake(b, sim.Target().Connect(b))
}

// BenchmarkRawDelete deletes, one after the other, b.N persistent
// sequential nodes created before the timer starts: the floor of a take.
func BenchmarkRawDelete(b *testing.B) {
	c := benchzk.Conn(b)
	ctx := b.Context()
	const dir = "/bench/raw"
	benchzk.Dir(b, c, dir)
	nodes := make([]string, b.N)
	for i := range nodes {
		var err error
		if nodes[i], err = c.Create(ctx, dir+"/qn-", []byte("item-payload-32-bytes-long------"), zk.ModePersistentSequential); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for _, n := range nodes {
		if err := c.Delete(ctx, n, zk.AnyVersion); err != nil {
			b.Fatal(err)
		}
	}
}
