// Package benchzk gives the recipes' Go benchmarks a connection to a
// standalone ZooKeeper server of their own, with forceSync on, as in
// production and as the peers' benchmarks run it.
package benchzk

import (
	"context"
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
