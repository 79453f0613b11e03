package testkit_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// leaderService is the code under test: while it leads it writes each job
// it is handed, and stops when its leadership ctx ends.
func leaderService(jobs <-chan string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				fmt.Println("service stopped writing:", context.Cause(ctx))
				return nil
			case job := <-jobs:
				fmt.Println("leader wrote", job)
			}
		}
	}
}

// My service stops writing when it loses leadership: its session expires
// on the simulator, as when a real server stops hearing from it.
func Example_leaderStopsWhenSessionExpires() {
	sim := testkit.NewSim()
	defer sim.Close()
	conn := sim.Connect()
	e, _ := election.New(conn, "/app/leader", election.WithSuspendedIsLost(false))
	defer e.Close()

	jobs, done := make(chan string), make(chan error)
	go func() { done <- e.Run(context.Background(), leaderService(jobs)) }()
	jobs <- "job-1" // taken only while the service leads
	sim.Expire(conn)
	fmt.Println("Run:", <-done)
	// Output:
	// leader wrote job-1
	// service stopped writing: election: session lost
	// Run: election: session lost
}

// startWorker is the code under test: it acquires l, then works in the
// background, holding l until ctx ends; it releases l and reports on done.
func startWorker(ctx context.Context, l *lock.Lock) (done <-chan error, err error) {
	if _, err := l.Acquire(ctx); err != nil {
		return nil, err
	}
	d := make(chan error, 1)
	go func() {
		<-ctx.Done()
		d <- l.Release(context.WithoutCancel(ctx))
	}()
	return d, nil
}

// My worker releases the lock when its context ends: another handle,
// waiting for it, then acquires.
func Example_workerReleasesLockOnCancel() {
	sim := testkit.NewSim()
	defer sim.Close()
	a, _ := lock.New(sim.Connect(), "/app/lock")
	b, _ := lock.New(sim.Connect(), "/app/lock")
	defer a.Close()
	defer b.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done, _ := startWorker(ctx, a)
	held, _, _ := b.TryAcquire(context.Background())
	fmt.Println("while the worker holds it, b gets it:", held)
	cancel()
	fmt.Println("worker returned:", <-done)
	g, _ := b.Acquire(context.Background())
	fmt.Println("then b acquires:", g != nil, b.State())
	// Output:
	// while the worker holds it, b gets it: false
	// worker returned: <nil>
	// then b acquires: true LEADER
}

// My consumer's item is delivered again when it crashes: it claims an item
// with TakeItem and its session expires before Ack (a crash, as the server
// sees it); another consumer gets the same item.
func Example_itemRedeliveredAfterConsumerCrash() {
	ctx := context.Background()
	sim := testkit.NewSim()
	defer sim.Close()
	conn1 := sim.Connect()
	c1, _ := queue.New(conn1, "/app/jobs")
	c2, _ := queue.New(sim.Connect(), "/app/jobs")
	defer c1.Close()
	defer c2.Close()

	_ = c1.Offer(ctx, []byte("job-1"))
	it1, _ := c1.TakeItem(ctx)
	sim.Expire(conn1) // consumer 1 crashes before its Ack
	it2, _ := c2.TakeItem(ctx)
	fmt.Println("consumer 2 got", string(it2.Data()), "again:", it2.Node() == it1.Node())
	fmt.Println("consumer 1's late ack:", errors.Is(it1.Ack(ctx), queue.ErrClaimLost))
	// Output:
	// consumer 2 got job-1 again: true
	// consumer 1's late ack: true
}
