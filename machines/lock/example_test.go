package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
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

// A revocable holder is told when asked to give the lock up, and decides.
func ExampleWithRevocable() {
	ctx := context.Background()
	sim := testkit.NewSim()
	conn := sim.Connect()
	defer conn.Close()

	l, err := lock.New(conn, "/app/locks/report", lock.WithRevocable())
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	g, err := l.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}

	// Another process asks the holder (Curator's Revoker does the same).
	hs, _ := lock.Holders(ctx, conn, "/app/locks/report")
	if err := lock.RequestRevoke(ctx, conn, hs[0].Node); err != nil {
		log.Fatal(err)
	}

	<-g.RevokeRequested() // the holder decides: here it gives the lock up
	fmt.Println("asked; still held:", g.Err() == nil)
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	err = lock.RequestRevoke(ctx, conn, g.Node())
	fmt.Println("asked again:", errors.Is(err, lock.ErrNotHeld))
	// Output:
	// asked; still held: true
	// asked again: true
}

// A Multi holds several locks as one, taking them in path order.
func ExampleNewMulti() {
	ctx := context.Background()
	sim := testkit.NewSim()
	conn := sim.Connect()
	defer conn.Close()

	m, err := lock.NewMulti(conn, []string{"/app/locks/to", "/app/locks/from"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	mg, err := m.Acquire(ctx) // every lock, or none
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range mg.Grants() { // in the order given to NewMulti
		fmt.Println(zk.Parent(g.Node()))
	}
	if err := m.Release(ctx); err != nil {
		log.Fatal(err)
	}
	<-mg.Lost()
	fmt.Println(mg.Err())
	// Output:
	// /app/locks/to
	// /app/locks/from
	// lock: released
}
