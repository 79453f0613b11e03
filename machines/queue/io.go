package queue

// input is everything that can happen to a consumer's machine: a call, a
// reply to one of its commands, a watch firing, a session change: the
// types below and the runtime's standard inputs, which Step switches on.
type input = any

// takeKind is what a take call wants.
type takeKind int

const (
	kindPeek  takeKind = iota + 1 // the head's data, left in place; ErrEmpty when empty
	kindPoll                      // the head, removed; ErrEmpty when empty
	kindTake                      // the head, removed; waits for one
	kindClaim                     // the head, claimed (acknowledged consumption); waits for one
	kindWait                      // nothing, once there is an item to take (a sharded take waits so)
)

var kindNames = map[takeKind]string{kindPeek: "peek", kindPoll: "poll", kindTake: "take", kindClaim: "claim", kindWait: "wait"}

func (k takeKind) String() string { return kindNames[k] }

// takeCall asks for the head of the queue. Try: a take or claim that says
// ErrEmpty at once when the cache, once listed, has nothing to take (a
// sharded handle's look at one shard).
type takeCall struct {
	Req  uint64
	Kind takeKind
	Try  bool
}

// offerCall adds items (one, or a batch made in one multi), each created
// with name prefix Prefix.
type offerCall struct {
	Req    uint64
	Prefix string
	Items  [][]byte
}

// lenCall asks for the number of items (the parent's child count).
type lenCall struct{ Req uint64 }

// ackCall ends a claim on item Name made on session Session: Ack deletes
// the item and the claim, Nack only the claim.
//
// With Next (Consume's), the same call also claims the item a TakeItem
// would get next, in the same multi, when the cache has one: it answers,
// once both are through, with the ack's error and a joined value.
type ackCall struct {
	Req     uint64
	Name    string
	Session int64
	Nack    bool
	Next    bool
	// Back: the machine's own give-back of a claim that an answer no
	// caller took had given (see refused): no NACKED, not a redelivery.
	Back bool
}

// refused is an answer that no caller took (runtime.Spec.Refused): its
// caller stopped waiting as it came. The item or claim it gave is the
// machine's again.
type refused struct{ Taken taken }

// listed is the reply to listItems. Watched: a watch was left (on the
// children, or on the path's creation when it does not exist yet).
type listed struct {
	Cmd      uint64
	Children []string
	Watched  bool
	// Dir is the queue node's czxid, 0 when it does not exist: a
	// different one means it was deleted (a reaped container) and created
	// again, with its sequence numbers started over.
	Dir int64
	Err error
}

// childrenChanged: the watch listItems left fired (or ended with the
// session).
type childrenChanged struct{ Cmd uint64 }

// dataRead is the reply to readItem.
type dataRead struct {
	Cmd  uint64
	Name string
	Data []byte
	// Version: the item's data version; every claim bumps it.
	Version int32
	Err     error
}

// removed is the reply to removeItem.
type removed struct {
	Cmd  uint64
	Name string
	Err  error
}

// claimed is the reply to claimItem.
type claimed struct {
	Cmd  uint64
	Name string
	// Session is the session the claim was made on, when it succeeded
	// (0: the connection's session changed while it was in flight). A
	// claim asked on one session can go out on the next (go-zookeeper
	// sends what it had queued), and its reply reach the machine before
	// the news of that session.
	Session int64
	Version int32 // the item's version our claim left
	Err     error
}

// claimWatched is the reply to watchClaim: whether another consumer's
// claim still exists (then a watch was left on it).
type claimWatched struct {
	Cmd    uint64
	Name   string
	Exists bool
	Err    error
}

// claimGone: the watch on another consumer's claim fired: it was deleted
// (acked, nacked, or its session ended), or the watch ended.
type claimGone struct {
	Cmd     uint64
	Name    string
	Deleted bool
}

// acked is the reply to endClaim.
type acked struct {
	Cmd  uint64
	Name string
	Err  error
}

// checked is the reply to checkItem: whether the item and its claim exist,
// and the claim's owner.
type checked struct {
	Cmd        uint64
	Name       string
	ItemExists bool
	ClaimOwner int64 // 0: no claim
	Version    int32 // the item's version
	// Session is the session the reads were made on (0: it changed while
	// they were made). Its change may reach the machine after this reply.
	Session int64
	Err     error
}

// offered is the reply to createItems, for the Offer call Req.
type offered struct {
	Req   uint64
	Names []string
	Err   error
}

// restored is the reply to restoreItem.
type restored struct {
	Cmd  uint64
	Name string
	Err  error
}

// counted is the reply to countItems, for the Len call Req.
type counted struct {
	Req uint64
	N   int
	Err error
}

// command is a request the machine asks its shell to make; the inputs
// that answer it carry its ID.
type command interface{ ID() uint64 }

// listItems lists the queue's children, after a sync when Sync is set,
// leaving a child watch when Watch is set (an existence watch when the
// path does not exist yet).
type listItems struct {
	Cmd   uint64
	Sync  bool
	Watch bool
}

// readItem reads an item's data.
type readItem struct {
	Cmd  uint64
	Name string
}

// removeItem deletes an item: the consumer whose delete succeeds owns it.
type removeItem struct {
	Cmd  uint64
	Name string
}

// claimItem creates our ephemeral claim under an item (with Data) and,
// in the same multi, sets the item's data to Item, its own, at Version,
// the version read with it: the claim bumps the item's version, so an
// ack or nack of an older claim, which checks its own version, fails on
// the server (a late one: sent on a session that ended, applied after
// another consumer claimed the item). It fails itself if the item was
// claimed and given back since the read.
type claimItem struct {
	Cmd     uint64
	Name    string
	Data    []byte
	Item    []byte
	Version int32
}

// watchClaim watches another consumer's claim on an item.
type watchClaim struct {
	Cmd  uint64
	Name string
}

// endClaim deletes our claim and, unless Nack, the item with it, in one
// multi that checks the item's Version, the one our claim left: it fails
// (zk.ErrBadVersion) once another consumer claimed the item since. With
// Next, the multi also claims item Next as claimItem does (Data,
// NextData, NextVersion): both are answered, acked first, then claimed;
// an op that failed in the multi answers its own part, and the other part
// is answered with errNotApplied.
type endClaim struct {
	Cmd         uint64
	Name        string
	Nack        bool
	Version     int32
	Next        string
	Data        []byte
	NextData    []byte
	NextVersion int32
}

// checkItem reads whether an item and its claim exist, after a request
// whose reply was lost.
type checkItem struct {
	Cmd  uint64
	Name string
}

// createItems makes an Offer call: it creates the call's items, one
// create or one multi for several, creating the queue's path first when
// it is missing.
type createItems struct {
	Cmd uint64
	offerCall
}

// restoreItem puts back, under its own name, an item whose removal
// succeeded after its caller had stopped waiting.
type restoreItem struct {
	Cmd  uint64
	Name string
	Data []byte
}

// countItems makes a Len call: it reads the number of the path's
// children.
type countItems struct {
	Cmd uint64
	lenCall
}

func (c listItems) ID() uint64   { return c.Cmd }
func (c readItem) ID() uint64    { return c.Cmd }
func (c removeItem) ID() uint64  { return c.Cmd }
func (c claimItem) ID() uint64   { return c.Cmd }
func (c watchClaim) ID() uint64  { return c.Cmd }
func (c endClaim) ID() uint64    { return c.Cmd }
func (c checkItem) ID() uint64   { return c.Cmd }
func (c createItems) ID() uint64 { return c.Cmd }
func (c restoreItem) ID() uint64 { return c.Cmd }
func (c countItems) ID() uint64  { return c.Cmd }
