package grpcresolver_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/zkrecipes/zkrecipes/adapters/grpcresolver"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// Two gRPC servers register as instances of "api"; a channel dialled as
// zk:///api finds them through ZooKeeper and spreads its calls over both
// (round robin). As instances register and leave, the channel follows.
func ExampleNewBuilder() {
	s := sim.New()
	defer s.Close()
	ctx := context.Background()
	conn := s.Connect()
	defer conn.Close()

	ids := map[string]string{} // server address → instance id
	for _, id := range []string{"i-1", "i-2"} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go srv.Serve(lis)
		defer srv.Stop()
		addr := lis.Addr().(*net.TCPAddr)
		ids[addr.String()] = id
		r, err := discovery.Register(ctx, conn, "/services", discovery.Instance{
			Name: "api", ID: id, Address: addr.IP.String(), Port: addr.Port})
		if err != nil {
			panic(err)
		}
		defer r.Close()
	}

	cc, err := grpc.NewClient("zk:///api",
		grpc.WithResolvers(grpcresolver.NewBuilder(conn, "/services")),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	answered := map[string]bool{}
	for len(answered) < 2 { // until each server has answered a call
		var p peer.Peer
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
			panic(err)
		}
		answered[ids[p.Addr.String()]] = true
	}
	fmt.Println(slices.Sorted(maps.Keys(answered)))
	// Output: [i-1 i-2]
}
