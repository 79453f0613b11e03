package cache_test

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// A tree cache follows the instances under /app/services: Get and Walk
// read it with no request, and each change comes as an event with the
// node's data and version.
func ExampleNewTree() {
	s := sim.New()
	defer s.Close()
	ctx := context.Background()
	conn := s.Connect()
	defer conn.Close()
	for _, p := range []string{"/app", "/app/services", "/app/services/api", "/app/services/api/i-1"} {
		if _, err := conn.Create(ctx, p, []byte("10.0.0.5:8080"), zk.ModePersistent); err != nil {
			panic(err)
		}
	}

	tc, err := cache.NewTree(conn, "/app/services", cache.WithMaxDepth(3))
	if err != nil {
		panic(err)
	}
	defer tc.Close()
	sub := tc.Subscribe()
	defer sub.Close()
	if err := tc.Initialized(ctx); err != nil { // the first load is done
		panic(err)
	}
	n, ok := tc.Get("/app/services/api/i-1")
	fmt.Println(n.Path, string(n.Data), ok)

	if _, err := conn.Set(ctx, "/app/services/api/i-1", []byte("10.0.0.6:8080"), zk.AnyVersion); err != nil {
		panic(err)
	}
	for ev := range sub.C {
		if ev.Type == events.NodeUpdated {
			fmt.Println(ev.Type, ev.Node, string(ev.Data), ev.Version)
			break
		}
	}
	tc.Walk(func(n cache.Node) bool {
		fmt.Println(n.Path)
		return true
	})
	// Output:
	// /app/services/api/i-1 10.0.0.5:8080 true
	// NODE_UPDATED /app/services/api/i-1 10.0.0.6:8080 1
	// /app/services
	// /app/services/api
	// /app/services/api/i-1
}
