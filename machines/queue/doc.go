// Package queue is a distributed queue on ZooKeeper: FIFO, with
// priorities, batches and acknowledged consumption.
//
// # Layout
//
// Items are persistent sequential children of the queue's path, with the
// item's bytes as data: qn-<seq10> (ZooKeeper's recipe queue and Curator's
// SimpleDistributedQueue use the same names, so they and this package
// produce into and take from one queue together), and
// qn-<prio10>-<seq10> for an item offered with a priority. The first Offer
// creates the queue's path as a persistent node: it is not reaped when
// empty, so item names are never reused. An acknowledged consumer claims
// an item with an ephemeral child of the item node, named "claim", whose
// data is the handle's id (WithID). A queue of n shards (WithShards) holds
// n such queues, <path>/shard-<k>, and records n as the path's data.
//
// # The consumer
//
// A handle's consumer is an actor that keeps the queue's items in a sorted
// cache fed by one child watch: a take deletes (or claims) the item it
// chose, and the data of the next items is read ahead, four at a time. So
// a take costs about one delete, and there is no listing per item. How a
// consumer chooses, with others taking from the same queue, is told at
// its rule (machine.go, candidate).
//
// # Order
//
// Lower priorities come first. Within a shard and a priority, every
// consumer gets the items in the order they were offered (its calls one
// after another); across shards there is no order (see WithShards). The
// exceptions: an item delivered again (a nack, a claim gone with its
// session) comes as soon as it is seen, and so does one put back for a
// call that gave up. 4 producers and 4 consumers with session expiries,
// on the simulator and a real server: TestPropertyAcknowledged,
// TestPropertySharded (keyed, 4 shards) and others.
//
// # Delivery
//
// Take and Poll remove the item before returning it: if the process dies
// before handling it, it is gone. They return every item at most once,
// except when the reply to their delete was lost and the item was gone
// when looked at again (after a sync: the server reconnected to may not
// have applied the delete yet): the item is returned (never lost), with
// ErrUncertain on its TAKEN event, and may have been returned to another
// consumer too.
//
// A write whose reply was lost (a take's delete, a claim, an ack) is
// looked for, after a sync, before it is made again. The first may still
// land after that look: a write made again that misses its target (the
// item or claim gone, the claim there) looks again instead of taking the
// miss for another consumer's doing, so an ack whose first multi landed
// late says nil, not ErrClaimLost, and such a take still returns its item.
//
// TakeItem and Consume deliver at least once: the item stays in the queue,
// claimed, until Ack deletes item and claim in one multi, or Nack gives it
// back at its place. Consume's ack (or nack) claims the item its next call
// would get in the same multi, when the handle has read it ahead, so that
// an item costs one write round trip, not two. When the consumer's session
// ends, its claims go with it and the items are delivered again
// (REDELIVERED).
//
// A claim sets the item's data to itself in the same multi, which bumps
// the item's version; an ack or nack checks the version its claim left.
// go-zookeeper sends the requests it had queued when a session ended on
// the session that comes next: an ack made so, after another consumer
// claimed the item, fails on the server (ErrClaimLost), and cannot delete
// the other's claim or the item. Ack says ErrUncertain in one case: its
// reply was lost, and the session ended before the item was looked at;
// the item is gone for good, acked by us or, after a redelivery, by
// another consumer.
//
// # Failover
//
// The claims of a consumer whose process dies or is cut off go when the
// server expires its session: the session timeout (zk.WithSessionTimeout,
// as the server granted it) after the server last heard from it, plus up
// to one server tick (tickTime, 2 s by default), because the server
// expires sessions on a grid of ticks. Its claimed items are then
// delivered again (REDELIVERED). A consumer that closes gives its claims
// back at once.
//
// # Calls that give up
//
// A take whose ctx ends loses nothing. Its item stays where it was if its
// delete or claim was not sent; if it was, and it is made, a removed item
// is put back at its place (created again under its own name) and a claim
// is given back, with no NACKED event. The handle's takes wait until it is
// back, so they still take it first.
//
// # Length
//
// A listing of a long queue exceeds the Java client's packet limit
// (jute.maxbuffer, about 60,000 qn- names at 1 MiB): Curator's consumers
// stop there. This package's consumer reads a listing of any length.
package queue
