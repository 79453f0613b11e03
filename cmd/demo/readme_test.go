package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A service on a secured ensemble: authenticated, under its chroot, its
// nodes its own. Another identity reads them but cannot remove them.
func Example_securedEnsemble() {
	ctx := context.Background()
	sim := testkit.NewSim() // on a real ensemble, the same options through zk.Connect:
	// servers, chroot, err := zk.ParseConnectString("zk1:2281,zk2:2281/apps/billing")
	// conn, err := zk.Connect(ctx, servers, zk.WithChroot(chroot), zk.WithTLS(tlsConfig),
	// 	zk.WithAuth("digest", []byte("billing:s3cret")))
	conn := sim.Connect(zk.WithChroot("/apps/billing"),
		zk.WithAuth("digest", []byte("billing:s3cret"))) // nodes: CreatorAll + world read
	defer conn.Close()
	l, _ := lock.New(conn, "/locks/orders")
	g, _ := l.Acquire(ctx)
	fmt.Println(strings.HasPrefix(g.Node(), "/locks/orders/")) // relative to the chroot

	other := sim.Connect(zk.WithAuth("digest", []byte("intruder:guess")))
	defer other.Close()
	hs, _ := lock.Holders(ctx, other, "/apps/billing/locks/orders") // world read
	err := other.Delete(ctx, hs[0].Node, zk.AnyVersion)
	fmt.Println(len(hs), errors.Is(err, zk.ErrNoAuth))
	l.Close()
	// Output:
	// true
	// 1 true
}

// TestReadmeShowsTheSecuredExample keeps the README's "Secured ensembles"
// snippet the same as Example_securedEnsemble above, which runs.
func TestReadmeShowsTheSecuredExample(t *testing.T) {
	golden.ReadmeShows(t, "../../README.md", "readme_test.go", "Example_securedEnsemble")
}
