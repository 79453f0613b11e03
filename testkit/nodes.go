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
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		_, ok, ch, err := c.ExistsW(ctx, path)
		if err != nil {
			t.Fatalf("waiting for %s: %v", path, err)
		}
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", path, ctx.Err())
		}
	}
}
