// Package group is group membership: Curator's GroupMember (a
// PersistentNode in EPHEMERAL mode under the group's path) and kazoo's
// Party.
//
//	m, err := group.Join(ctx, conn, "/app/members", "node-a", payload) // our node, /app/members/node-a
//	err = m.SetData(ctx, payload2)
//	g, err := group.Watch(conn, "/app/members")
//	ms := g.Members()                  // map[id][]byte
//	sub := g.Subscribe()               // MEMBER_JOINED, MEMBER_UPDATED, MEMBER_LEFT
//	err = m.Leave(ctx)                 // or Close
//
// # Node layout
//
// A member is the ephemeral node <path>/<id> whose data is the member's
// payload, the layout of Curator's GroupMember: a Curator process and a Go
// process in one group see each other's members. The group's path and its
// missing parents are made as containers.
//
// # What a member keeps
//
// A Member keeps its node for as long as it is not closed. After its
// session ends (LOST) the node is gone with it; once the connection has a
// new session the node is made again with the data of the latest SetData.
// A watch on the node sees a deletion by someone else, and the node is
// made again the same way. A create whose reply was lost finds the node
// made by our session and takes it. A node of the id held by another live
// session is never taken over: Join fails with ErrMemberExists, and a
// member that finds its id taken when making its node again becomes
// FAILED with it. A node left by an earlier session of this member
// (seen before the server deleted it) is deleted and made again.
//
// # What a watcher sees
//
// Watch is a children cache (machines/cache) of the group's path: each
// member's joins, data changes and departures, in the server's order for
// that member, with the data and version at that change; changes faster
// than the cache reads them may be coalesced, never reordered. After a
// connection loss it catches up from its watches; after a session's end
// it reads the group again and publishes only the differences.
//
// # Failover
//
// A member whose process dies, or is cut off from the ensemble, leaves
// the group only when the server expires its session: after the session
// timeout, and up to one server tick more. A member that closes or leaves
// deletes its node at once.
package group
