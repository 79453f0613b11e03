package rwlock_test

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Readers share the lock; a writer holds it alone, and may downgrade to a
// reader without letting another writer in.
func Example() {
	ctx := context.Background()
	sim := testkit.NewSim() // an in-memory ZooKeeper; on a real one:
	conn := sim.Connect()   // conn, err := zk.Connect(ctx, []string{"127.0.0.1:2181"})
	defer conn.Close()

	rw, err := rwlock.New(conn, "/app/rw/catalog")
	if err != nil {
		panic(err)
	}
	defer rw.Close()

	w, err := rw.WriteLock().Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("writing, token", w.Token() > 0)

	// Downgrade: the read lock at once, then let the write lock go.
	r, err := rw.ReadLock().Acquire(ctx)
	if err != nil {
		panic(err)
	}
	if err := rw.WriteLock().Release(ctx); err != nil {
		panic(err)
	}
	hs, _ := rwlock.Holders(ctx, conn, "/app/rw/catalog")
	fmt.Println("holders:", len(hs), "write:", hs[0].Write, "ours:", hs[0].Node == r.Node())

	// Holding only the read lock, the write lock is refused.
	_, err = rw.WriteLock().Acquire(ctx)
	fmt.Println(err)
	// Output:
	// writing, token true
	// holders: 1 write: false ours: true
	// rwlock: upgrade from read to write lock: the read lock is held or being acquired
}
