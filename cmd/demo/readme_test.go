package main

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
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
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "readme_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "Example_securedEnsemble" {
			body := string(src[fset.Position(fn.Doc.Pos()).Offset:fset.Position(fn.End()).Offset])
			if !strings.Contains(string(readme), body) {
				t.Errorf("README.md does not show Example_securedEnsemble from cmd/demo/readme_test.go verbatim:\n%s", body)
			}
			return
		}
	}
	t.Fatal("no Example_securedEnsemble")
}
