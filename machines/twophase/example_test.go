package twophase_test

import (
	"context"
	"fmt"
	"log"

	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// inventory is a participant's Handler: it votes yes while it has stock.
type inventory struct {
	stock int
	done  chan string
}

func (h *inventory) Prepare(_ context.Context, tx twophase.Tx) (bool, error) {
	if h.stock < len(tx.Payload) {
		return false, fmt.Errorf("only %d left", h.stock)
	}
	return true, nil
}

func (h *inventory) Commit(_ context.Context, tx twophase.Tx) error {
	h.stock -= len(tx.Payload)
	h.done <- fmt.Sprintf("%s committed, %d left", tx.ID, h.stock)
	return nil
}

func (h *inventory) Abort(_ context.Context, tx twophase.Tx, reason string) error {
	h.done <- fmt.Sprintf("%s aborted: %s", tx.ID, reason)
	return nil
}

func Example() {
	ctx := context.Background()
	sim := testkit.NewSim() // an in-memory ZooKeeper; on a real one:
	conn := sim.Connect()   // conn, err := zk.Connect(ctx, []string{"127.0.0.1:2181"})
	defer conn.Close()

	h := &inventory{stock: 3, done: make(chan string, 4)}
	p, err := twophase.NewParticipant(conn, "/app/2pc", "warehouse", h)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- p.Serve(sctx) }() // until sctx ends
	if err := twophase.WaitRegistered(ctx, conn, "/app/2pc", "warehouse"); err != nil {
		log.Fatal(err)
	}

	c, err := twophase.NewCoordinator(conn, "/app/2pc")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, tx := range []struct{ id, items string }{{"order-1", "ab"}, {"order-2", "cde"}} {
		out, err := c.Propose(ctx, tx.id, []byte(tx.items), []string{"warehouse"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %+v\n", tx.id, out)
		fmt.Println(<-h.done)
	}
	stop()
	fmt.Println(<-served)
	// Output:
	// order-1: {Committed:true Reason:}
	// order-1 committed, 1 left
	// order-2: {Committed:false Reason:warehouse: only 1 left}
	// order-2 aborted: warehouse: only 1 left
	// context canceled
}
