package barrier_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// Three workers start together (Enter returns once all three have
// arrived) and finish together (Leave returns once all three have left).
func ExampleDoubleBarrier() {
	s := sim.New()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 3 {
		conn := s.Connect() // each worker has its own session
		defer conn.Close()
		d, err := barrier.NewDouble(conn, "/app/barrier/round", 3)
		if err != nil {
			panic(err)
		}
		defer d.Close()
		wg.Go(func() {
			if err := d.Enter(ctx); err != nil { // synchronized start
				panic(err)
			}
			_ = i // ... the work of worker i ...
			if err := d.Leave(ctx); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	fmt.Println("all three started together and finished together")
	// Output: all three started together and finished together
}
