// Package benchzk gives the recipes' Go benchmarks a connection to a
// standalone ZooKeeper server of their own, with forceSync on, as in
// production and as the peers' benchmarks run it.
package benchzk

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Conn starts a server for b and connects to it; both end with b.
func Conn(b *testing.B) zk.Conn {
	srv := testkit.StartServer(b, testkit.WithForceSync(true))
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	c, err := zk.Connect(ctx, []string{srv.Addr()}, zk.WithSessionTimeout(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// Dir creates the persistent node dir and its parents, before timing.
func Dir(b *testing.B, c zk.Conn, dir string) {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		if _, err := c.Create(b.Context(), dir[:i], nil, zk.ModePersistent); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			b.Fatal(err)
		}
	}
}
