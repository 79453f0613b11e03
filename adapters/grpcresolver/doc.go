// Package grpcresolver resolves gRPC targets zk:///<service> to the
// instances of a service registered in ZooKeeper (machines/discovery, or
// Curator's ServiceDiscovery on the same base): a channel follows them as
// they register and leave, with no polling. etcd ships the same for its
// users (client/v3/naming/resolver).
//
//	cc, err := grpc.NewClient("zk:///api",
//		grpc.WithResolvers(grpcresolver.NewBuilder(conn, "/services")),
//		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
//		grpc.WithTransportCredentials(creds))
//
// It is the only package of zkrecipes that imports gRPC: the recipes, the
// runtime and the ZooKeeper adapter do not.
//
// # What the channel gets
//
// Each Build (gRPC builds a resolver when the channel leaves idle) makes a
// discovery.Provider of <base>/<service> on the Builder's connection. Once
// its first load is done the channel gets the instances' addresses, and
// then the new list at every change of it: an instance registered, gone
// (deregistered, or its session expired), or moved. An address is
// host:port from the instance's Address and Port; an instance registered
// with an SSLPort and no Port is reached on its SSLPort (the channel's
// transport credentials decide whether that is TLS); one with no address
// or no port is left out. Instances that share an address are one. A
// service with no instance gives the channel no address: its RPCs fail
// (or wait, with grpc.WaitForReady) until one registers. Which address an
// RPC goes to is the channel's load-balancing policy's choice (pick_first
// unless the service config says round_robin), not discovery.Strategy's.
//
// ResolveNow does nothing: ZooKeeper's watches push every change to the
// provider's cache, so reading again would find nothing new. While the
// connection is cut off the channel keeps the addresses it has; after a
// session's end the provider reads the service again, and the channel
// gets a new list only if it changed.
//
// # Close
//
// The channel closes its resolver on Close and when it goes idle. The
// provider is closed and the resolver's goroutine has ended when Close
// returns; nothing reaches the channel after it. ZooKeeper cannot take a
// watch back: each one the provider left fires once more, at the next
// change of its node, and is not set again. A Builder's connection closed
// under a channel is reported to it as discovery.ErrClosed.
package grpcresolver
