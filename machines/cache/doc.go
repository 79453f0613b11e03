// Package cache follows nodes of a ZooKeeper tree and tells subscribers
// of every change: a node (NewNode, Curator's NodeCache, kazoo's
// DataWatch), a node's children (NewChildren, Curator's
// PathChildrenCache, kazoo's ChildrenWatch) or a subtree (NewTree,
// Curator's TreeCache, to WithMaxDepth levels, the path being level 0).
//
//	tc, err := cache.NewTree(conn, "/app/services", cache.WithMaxDepth(3))
//	sub := tc.Subscribe()          // START, NODE_ADDED..., INITIALIZED, then changes
//	err = tc.Initialized(ctx)      // the first load is done
//	n, ok := tc.Get("/app/services/api/i-1")
//
// A cache creates nothing. It reads each node with a data watch, and each
// node above the deepest level with a child watch, and reads again what a
// watch says changed. The first load is pipelined: up to 256 requests in
// flight, not one round trip at a time.
//
// # What a subscriber sees
//
// NODE_ADDED, NODE_UPDATED and NODE_REMOVED, each with the node's path
// (Event.Node), its Data and Version at that change. For each path they
// come in the server's order, and each is a state the server had: the
// versions only grow, and a node made again after a deletion is removed
// and added again. ZooKeeper's watches are one-shot, so changes made
// faster than the cache reads them are coalesced (two sets are one
// NODE_UPDATED with the later data), never reordered. A parent is added
// before its children and removed after them. INITIALIZED comes once,
// after the first full load; a subscriber who subscribes after it gets it
// at once, after START. What the cache shows (Get, Children, Walk) is
// written before the event is published: one who got an event finds that
// state, or a later one.
//
// A node that does not exist is no error: the cache waits for it (an
// exists watch), and its INITIALIZED says only that it is not there.
//
// # Faults
//
// After a connection loss the session and its watches survive: the cache
// catches up from the watches the server fires for what changed while it
// was away, and makes again only the requests the loss failed; nothing is
// read twice. After the session's end (LOST) the watches are gone: once
// the connection has a new session the cache reads every node again and
// publishes only the differences (adds, updates, removes), never a remove
// and an add of a node that did not change. Until then it shows what it
// had.
//
// # Errors
//
// A relative path (zk.ErrInvalidPath), a negative WithMaxDepth or an
// option a constructor cannot use (ErrInvalidOption), a nil or closed
// connection (ErrClosed) are refused before anything is sent. A node the
// session may not read (zk.ErrNoAuth) is published as a FAILED event
// naming it, and left out.
package cache
