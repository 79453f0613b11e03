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
// data is the handle's id (WithID).
//
// # The consumer
//
// A handle's consumer is an actor that keeps the queue's items in a sorted
// cache fed by one child watch: a take deletes (or claims) the item it
// chose, and the data of the next items is read ahead, four at a time (a
// read sent beside a delete delays it on the server: batched, three
// deletes in four go alone). So a take costs about one delete, and there
// is no listing per item.
//
// # Order
//
// Lower priorities come first, and items of one priority in the order they
// were offered. A lone consumer takes each item at the head. Consumers
// taking from one queue at once race for the head; one that loses a race
// (its delete, claim or read finds the item gone or claimed) avoids that
// item's block (the run of 32 sequence numbers it is in), from that item
// on, and takes the oldest item of the rest: each consumer ends with a
// block of its own, instead of all deleting the same item. A consumer
// never goes back: each takes items in the queue's order, after the last
// one it took or claimed, so each producer's items of one priority reach
// it in the order offered, with several consumers as with one (4
// producers and 4 consumers with session expiries, on the simulator and a
// real server: see TestPropertyPlain and TestPropertyAcknowledged). Items
// of a block before a consumer's last are left to the block's holder. A
// consumer left with nothing it does not avoid steals the upper half of
// the block with the most items after its last (8 or more); the holder
// keeps the lower half. A block with fewer items left is its holder's for
// 10 ms, then the idle consumer takes its oldest. An item that has been
// the oldest in a consumer's cache, behind its last, for a second, and is
// still there in a listing made then, has no holder taking it (closed, no
// longer taking, or its claim gone with a session no other consumer
// watched): the consumer takes it and the rest of its block next, out of
// order, whether or not it has items after its last (a Poll with nothing
// else to take does not wait). So a consumer that stops taking holds up
// to a block of items for a second, in a queue that never runs dry too;
// the rule costs a consumer a listing a second, at most. A claim of an
// item that had a claim before is a redelivery (REDELIVERED), whether
// the consumer saw that claim or not (the item's count of child changes
// says so). The exceptions to the order: an item delivered again (a claim
// that went with its session, a nack), an item a consumer had and that
// went to no one (a take withdrawn after its delete, a write whose reply
// was lost and that turned out not made), and items taken after those
// waits. An item is never passed over for one of a larger priority
// number.
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
// back at its place. An ack claims the next item in the same multi, when
// the handle's cache has one, so that an item costs one write round trip,
// not two (a claim, then an ack): Consume's ack (or nack) claims it for
// its next call, and Ack for the handle's next TakeItem, which gets it at
// once; an item an Ack claimed ahead and no TakeItem took within
// WithClaimAhead's time is given back (other consumers see that as they
// see a nack: REDELIVERED), and so is one the handle's own Take, Poll or
// Peek would see; the handle's takes wait until it is back at its place,
// so they still take it first. If the next item was taken or claimed by
// another consumer first, nothing of the multi is applied, and the ack is
// sent again alone. When the consumer's session ends, its claims go with
// it and the items are delivered again (REDELIVERED). An Ack or Nack asked
// while the connection is down waits for the same session to come back
// (then it is sent) or to end (then ErrClaimLost: the item comes again).
//
// go-zookeeper sends the requests it had queued when a session ended on
// the session that comes next, and their replies can reach the consumer
// before the news of that session. A claim made so is ours on the new
// session: the consumer judges a claim, and the check of a write whose
// reply was lost, by the session it was made on, once the consumer knows
// that session. An Ack or Nack is sent only while the client is on the
// claim's session: asked once the client is on the next one, before the
// consumer has the news, it says ErrClaimLost, nothing sent (on the next
// session it would find another consumer's claim of the item, if any, and
// delete it). An Ack asked in the moment between a connection's loss and
// the consumer's news of it, while the client still names the old session,
// can go out on the next session; if its session had ended, and another
// consumer claimed the item since, that Ack deletes the other's claim with
// the item: both handled the item, the first Ack says ErrUncertain on its
// ACKED event, and the other's Ack says ErrClaimLost although the item
// will not come again. go-zookeeper keeps such a request queued and sends
// it on whatever session comes next, so the consumer cannot take it back.
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
// A take whose ctx ends loses nothing and keeps the order. An item taken
// or claimed for a call whose caller gave up before, or just as, the
// answer came is the handle's again: the handle's next take of the same
// kind gets it, if it comes while the delete or claim is still in flight;
// otherwise a removed item is put back at its place (created again under
// its own name) and a claim is given back, with no NACKED event. The
// handle's takes wait until it is back, so they still take it first.
//
// # Length
//
// A listing of a long queue exceeds the Java client's packet limit
// (jute.maxbuffer, about 60,000 qn- names at 1 MiB): Curator's consumers
// stop there. This package's consumer reads a listing of any length.
package queue
