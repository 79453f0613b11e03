package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// AwaitNode waits, with an exists watch, until path exists on c. It fails
// the test if that takes more than 15 s.
func AwaitNode(t testing.TB, c zk.Conn, path string) {
	t.Helper()
	awaitExists(t, c, path, true)
}

// AwaitNoNode waits, with an exists watch, until path does not exist on c.
// It fails the test if that takes more than 15 s.
func AwaitNoNode(t testing.TB, c zk.Conn, path string) {
	t.Helper()
	awaitExists(t, c, path, false)
}

func awaitExists(t testing.TB, c zk.Conn, path string, want bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		_, ok, ch, err := c.ExistsW(ctx, path)
		if err != nil {
			t.Fatalf("waiting for %s (exists: %t): %v", path, want, err)
		}
		if ok == want {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s (exists: %t): %v", path, want, ctx.Err())
		}
	}
}
