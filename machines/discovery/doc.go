// Package discovery is service discovery in the layout and JSON of
// Curator's curator-x-discovery: a Go process and a Java process find
// each other's instances.
//
//	r, err := discovery.Register(ctx, conn, "/services", discovery.Instance{
//		Name: "api", ID: "i-1", Address: "10.0.0.5", Port: 8080, Payload: json.RawMessage(`{"zone":"a"}`)})
//	err = r.Update(ctx, inst)       // the new JSON on our node
//	p, err := discovery.NewProvider(conn, "/services", "api", discovery.WithStrategy(discovery.RoundRobin))
//	inst, err := p.Instance(ctx)    // from memory; ErrNoInstances when there is none
//	all := p.Instances()            // sorted by ID
//	names, err := discovery.Services(ctx, conn, "/services")
//	err = r.Close()                 // deregisters
//
// # Node layout
//
// An instance is the ephemeral node <base>/<name>/<id> (Curator's
// DYNAMIC type) whose data is the instance's JSON, exactly as
// curator-x-discovery 5.4's default serializer writes it:
//
//	{"name":"api","id":"i-1","address":"10.0.0.5","port":8080,"sslPort":null,
//	 "payload":{"@class":"java.util.LinkedHashMap","zone":"a"},
//	 "registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":null}
//
// Zero ports and an empty address are null. Curator's "@class" of a Map
// payload is added when we write an object and taken out when we read
// one (see Instance.Payload); Curator reads a payload without it. The
// base and the service's node are made as containers, as Curator's
// creatingParentContainersIfNeeded does. What Curator writes, read and
// registered again by us, is the same bytes.
//
// # What a registration keeps
//
// A Registration is a group member (machines/group) of <base>/<name>: it
// keeps its node for as long as it is not closed. After its session ends
// the node is gone with it; on the connection's new session it is made
// again with the latest Update's JSON. A node deleted by someone else is
// made again the same way. A create whose reply was lost finds the node
// made by our session and keeps it. Unlike Curator, which deletes a node
// it finds at its path and makes its own, Register never takes over
// another live session's instance: ErrInstanceExists.
//
// # What a provider sees
//
// A Provider is a group watch (a children cache) of <base>/<name>: each
// instance's registration, update and departure, in the server's order
// for that instance, decoded once per change. Instance picks from that
// memory (RoundRobin, Random, Sticky) with no request to ZooKeeper; it
// waits only for the first load. A node whose data does not decode is
// left out, and its event carries ErrBadInstance: observers (the logs)
// see it. After a connection loss the provider catches up from its
// watches, keeping its instances meanwhile; after its session's end it
// reads the service again and publishes only the differences.
//
// Services lists the children of base. A base that does not exist has no
// services (Curator's queryForNames throws NoNodeException there).
//
// # Failover
//
// An instance whose process dies, or is cut off from the ensemble, leaves
// its providers only when the server expires its session: after the
// session timeout, and up to one server tick more, plus the watch
// notification's trip. One that closes leaves at once.
//
// # Errors
//
// Bad input is refused before anything is sent: zk.ErrInvalidPath (a
// relative base), ErrInvalidOption (a name or id that is not one node
// name, a payload or uriSpec that is not JSON, a type other than DYNAMIC,
// an Update changing the name or id, an option the function cannot use).
// ErrNoInstances, ErrInstanceExists, ErrCleanupPending (Close could not
// delete in time; the connection deletes the node once the session is
// back) and ErrClosed (after Close; it matches zkrecipes.ErrClosed) are
// the others.
package discovery
