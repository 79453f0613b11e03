package lock_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func Example() {
	ctx := context.Background()
	sim := testkit.NewSim() // an in-memory ZooKeeper; on a real one:
	conn := sim.Connect()   // conn, err := zk.Connect(ctx, []string{"127.0.0.1:2181"})
	defer conn.Close()

	l, err := lock.New(conn, "/app/locks/orders")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	g, err := l.Acquire(ctx) // blocks until held, ctx ends, or the session is lost
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-g.Lost(): // closed once the hold can no longer be trusted
		fmt.Println("lost")
	default:
		fmt.Println("held:", l.State()) // g.Token() fences writes to what the lock guards
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", l.State())
	// Output:
	// held: LEADER
	// released: STOP
}

// TestReadmeShowsTheExample keeps the README's lock example the same as
// Example above, which runs.
func TestReadmeShowsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	body = body[strings.Index(body, "func Example() {"):]
	body = body[:strings.Index(body, "\n}\n")+3]
	if !strings.Contains(string(readme), body) {
		t.Errorf("README.md does not show Example() from machines/lock/example_test.go verbatim:\n%s", body)
	}
}
