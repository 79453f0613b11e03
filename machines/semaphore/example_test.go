package semaphore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func Example() {
	ctx := context.Background()
	sim := testkit.NewSim() // an in-memory ZooKeeper; on a real one:
	conn := sim.Connect()   // conn, err := zk.Connect(ctx, []string{"127.0.0.1:2181"})
	defer conn.Close()

	s, err := semaphore.New(conn, "/app/sem/gpu", 2) // at most 2 leases at once
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	a, err := s.Acquire(ctx) // blocks until a lease is free, ctx ends, or the session is lost
	if err != nil {
		log.Fatal(err)
	}
	b, err := s.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	holders, err := semaphore.Holders(ctx, conn, "/app/sem/gpu") // from any connection
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holders:", len(holders), holders[0].Node == a.Node())

	ok, _, err := s.TryAcquire(ctx) // never waits: both leases are taken
	fmt.Println("third lease:", ok, err)

	if err := a.Release(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-b.Lost(): // closed once the lease can no longer be trusted
		fmt.Println("lost:", b.Err())
	default:
		fmt.Println("still held") // b.Token() fences writes to what the lease guards
	}
	// Output:
	// holders: 2 true
	// third lease: false <nil>
	// still held
}
