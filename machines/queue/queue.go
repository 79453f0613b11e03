package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ScopeName is the instrumentation scope of the queue's spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/queue"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// DefaultMaxItemSize is the largest item Offer accepts unless
// WithMaxItemSize says otherwise: a ZooKeeper server refuses (by closing
// the connection) a request over its jute.maxbuffer, 1 MiB - 1 byte by
// default, and a create carries its path and about 50 bytes beside the
// data.
const DefaultMaxItemSize = 1<<20 - 1024

// Errors of the queue. Match them with errors.Is; ErrClosed,
// ErrSessionLost, ErrInvalidOption and ErrCleanupPending also match the
// zkrecipes errors of the same names.
var (
	// ErrEmpty: Peek or Poll found no item (after a sync: an item whose
	// Offer returned before the call is seen).
	ErrEmpty = errors.New("queue: empty")
	// ErrTooLarge: an item, or a batch's items together, exceed what one
	// request may carry (WithMaxItemSize). Nothing was sent.
	ErrTooLarge = errors.New("queue: item too large")
	// ErrNilItem: an item is nil. Nothing was sent. (An empty, non-nil
	// item is fine.)
	ErrNilItem = errors.New("queue: nil item")
	// ErrInvalidPriority: a priority below 0 or above MaxPriority.
	ErrInvalidPriority = errors.New("queue: invalid priority")
	// ErrInvalidOption: an option's or argument's value is out of range.
	ErrInvalidOption = fmt.Errorf("queue: %w", zkrecipes.ErrInvalidOption)
	// ErrClaimLost: Ack or Nack of an item whose claim is gone (its
	// session ended, or Close gave it back): the item will be delivered
	// again, to this consumer or another.
	ErrClaimLost = errors.New("queue: claim lost")
	// ErrAcked: Ack or Nack of an item already acked or nacked.
	ErrAcked = errors.New("queue: item already acked or nacked")
	// ErrUncertain is on the TAKEN event of an item Take or Poll returned
	// after the reply to its delete was lost: the item was gone when
	// looked at again, removed by our delete or by another consumer's at
	// the same moment; it is returned, so it is never lost, and may have
	// been returned to that other consumer too. Ack returns it when the
	// reply to its multi was lost and the session ended before the item
	// was looked at: the item is gone for good, removed by this ack or,
	// after a redelivery, by another consumer's.
	ErrUncertain = errors.New("queue: uncertain removal")
	// ErrSessionLost: the session ended (LOST events carry it).
	ErrSessionLost = fmt.Errorf("queue: %w", zkrecipes.ErrSessionLost)
	// ErrItemLost: an item taken for a call whose caller had stopped
	// waiting could not be put back (FAILED events carry it).
	ErrItemLost = errors.New("queue: item could not be put back")
	// ErrClosed: the Queue, or its connection, is closed (or the
	// connection is nil).
	ErrClosed = fmt.Errorf("queue: %w", zkrecipes.ErrClosed)
	// ErrCleanupPending: Close could not give back the claims of items
	// still out within its close timeout (the connection is down); the
	// connection deletes them when the same session reconnects, or the
	// session's end does.
	ErrCleanupPending = fmt.Errorf("queue: %w", zkrecipes.ErrCleanupPending)
)

// Queue is a handle on a distributed queue at a path: it offers items and
// consumes them. Its consumer is an actor that keeps the queue's items in
// a sorted cache fed by one child watch. Its methods are safe for
// concurrent use.
type Queue struct {
	conn  zk.Conn
	path  string
	o     options
	tel   *runtime.Telemetry
	shell *runtime.Shell[input, command]
	attrs []attribute.KeyValue
	sent  metric.Int64Counter // messaging.client.sent.messages
	taken metric.Int64Counter // messaging.client.consumed.messages

	// How items spread over shards (see WithShards): the calls go to
	// shards, an unsharded queue's handle being its own one shard.
	shards  []*Queue
	own     int            // the shard this handle's consumer starts at
	rr      atomic.Uint64  // offers made, for the round-robin
	bus     *events.Joined // a sharded handle's events: its shards'
	mu      sync.Mutex
	checked bool // the path records our number of shards (see checkShards)
}

// Option configures a Queue. A nil Option is ignored.
type Option func(*options)

type options struct {
	id             string
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	maxItemSize    int
	closeTimeout   time.Duration
	shards         int
	acl            []zk.ACL
}

// WithID names this handle: its lifecycle events' Instance and the data
// of its claims (who holds an item). Default: a random uuid.
func WithID(id string) Option { return func(o *options) { o.id = id } }

// WithTracerProvider sets where spans go. Default: otel's global provider
// (a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithMeterProvider sets where measurements go: the ZooKeeper requests'
// db.client.operation.duration, and by the messaging conventions
// messaging.client.sent.messages (items offered) and
// messaging.client.consumed.messages (items taken, polled or claimed).
// Default: otel's global provider (a no-op until the application installs
// one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider = mp }
}

// WithMaxItemSize sets the largest item Offer accepts (bytes, at least 1),
// for a server whose jute.maxbuffer differs from the default. A batch may
// carry up to n + 1 KiB in all. Default DefaultMaxItemSize.
func WithMaxItemSize(n int) Option { return func(o *options) { o.maxItemSize = n } }

// WithCloseTimeout bounds how long Close waits to give back the claims of
// items still out. Default 10s; it must be positive.
func WithCloseTimeout(d time.Duration) Option { return func(o *options) { o.closeTimeout = d } }

// WithACL sets the ACL of every node the handle creates (its items,
// claims, and the queue's path and missing parents), in place of the
// connection's (zk.WithACL, or its default). Default: the connection's. An
// entry without a scheme or permissions makes New fail with
// ErrInvalidOption.
func WithACL(acl ...zk.ACL) Option { return func(o *options) { o.acl = acl } }

// New returns a handle on the queue at path. Nothing is sent: the first
// Offer creates the path, and the consumer reads the queue at its first
// take. Errors: zk.ErrInvalidPath, ErrInvalidOption, ErrClosed (a nil or
// closed connection).
func New(conn zk.Conn, path string, opts ...Option) (*Queue, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	if path == "/" {
		return nil, fmt.Errorf("queue: %w %q: the root cannot be a queue", zk.ErrInvalidPath, path)
	}
	o := options{maxItemSize: DefaultMaxItemSize, closeTimeout: 10 * time.Second, shards: 1}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.maxItemSize < 1:
		return nil, fmt.Errorf("%w: max item size %d: it must be at least 1", ErrInvalidOption, o.maxItemSize)
	case o.closeTimeout <= 0:
		return nil, fmt.Errorf("%w: close timeout %v: it must be positive", ErrInvalidOption, o.closeTimeout)
	case o.shards < 1 || o.shards > MaxShards:
		return nil, fmt.Errorf("%w: %d shards: it must be 1 to %d", ErrInvalidOption, o.shards, MaxShards)
	case conn == nil:
		return nil, fmt.Errorf("%w: nil connection", ErrClosed)
	case conn.State() == zk.StateClosed:
		return nil, fmt.Errorf("%w: connection closed", ErrClosed)
	}
	conn, err := zk.UseACL(conn, o.acl...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	if o.id == "" {
		o.id = uuid.NewString()
	}
	if o.shards > 1 {
		return newSharded(conn, path, o)
	}
	return newQueue(conn, path, o, false)
}

// newQueue returns a handle on the unsharded queue at path, its own one
// shard; checked: the path's record of shards was checked (the queue is
// a shard of a sharded one).
func newQueue(conn zk.Conn, path string, o options, checked bool) (*Queue, error) {
	m, err := newMachine(config{Path: path, ClaimData: []byte(o.id), SessionID: conn.SessionID()})
	if err != nil {
		return nil, err
	}
	q := &Queue{conn: conn, path: path, o: o, checked: checked,
		tel: runtime.NewTelemetry(conn, runtime.TelemetryConfig{TracerProvider: o.tracerProvider, MeterProvider: o.meterProvider,
			Scope: ScopeName, Version: Version, Recipe: "queue", Path: path, Instance: o.id}),
		attrs: []attribute.KeyValue{attribute.String("messaging.system", "zookeeper"), attribute.String("messaging.destination.name", path)},
	}
	var errs [2]error
	q.sent, errs[0] = q.tel.Meter().Int64Counter("messaging.client.sent.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Items offered to a queue."))
	q.taken, errs[1] = q.tel.Meter().Int64Counter("messaging.client.consumed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Items taken, polled or claimed from a queue."))
	if err := errors.Join(errs[:]...); err != nil {
		otel.Handle(err) // the counters are no-ops then
	}
	q.shell = runtime.Run[input, command](conn, m, runtime.Spec[input, command]{
		Recipe: "queue", Path: path, Instance: o.id, Telemetry: q.tel,
		Exec: q.exec,
		Withdraw: func(call input) bool {
			_, take := call.(takeCall)
			return take
		},
		Refused: func(call input, r runtime.Reply) (input, bool) {
			t, ok := r.Value.(taken)
			if c, take := call.(takeCall); !ok || t.Name == "" || take && c.Kind == kindPeek {
				return nil, false // nothing was taken or claimed
			}
			return refused{Taken: t}, true
		},
		ErrorType:      errorType,
		Closed:         ErrClosed,
		CloseTimeout:   o.closeTimeout,
		CleanupPending: ErrCleanupPending,
	})
	q.shards = []*Queue{q}
	return q, nil
}

// Path is the queue's path.
func (q *Queue) Path() string { return q.path }

// ID is the handle's id: WithID's, or a random uuid.
func (q *Queue) ID() string { return q.o.id }

// State is the consumer machine's state: START before its first take,
// DETERMINE while it lists the queue, READY with the items cached and
// watched, FAILED after a lost session (until it lists again), STOP once
// closed.
func (q *Queue) State() events.State { return q.shards[q.own].shell.State() }

// Subscribe returns a subscription to the queue's lifecycle events:
// OFFERED, TAKEN, CLAIMED, ACKED, NACKED, REDELIVERED, the session's
// SUSPENDED, RECONNECTED and LOST, and START, STOP_START, STOP_COMPLETE.
func (q *Queue) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	if q.bus != nil {
		return q.bus.Subscribe(opts...)
	}
	return q.shell.Subscribe(opts...)
}

// Offer adds data at the tail of the queue: one create of a persistent
// sequential node. When Offer returns nil, every session sees the item.
// An Offer that fails with a connection loss, or whose ctx ended while
// its create was out, may have been applied.
func (q *Queue) Offer(ctx context.Context, data []byte) error {
	return q.offer(ctx, itemPrefix(0, false), [][]byte{data}, -1)
}

// OfferBatch adds items at the tail of the queue, in order, in one multi:
// all of them or none. Errors as Offer, and ErrTooLarge when the items
// together exceed one request.
func (q *Queue) OfferBatch(ctx context.Context, items [][]byte) error {
	if len(items) == 0 {
		return nil
	}
	return q.offer(ctx, itemPrefix(0, false), items, -1)
}

// OfferPriority adds data with priority prio (0 to MaxPriority): lower
// numbers are taken first, and items of one priority in the order
// offered. A plain Offer is priority 0.
func (q *Queue) OfferPriority(ctx context.Context, data []byte, prio int) error {
	if prio < 0 || int64(prio) > MaxPriority {
		return fmt.Errorf("%w: %d: it must be 0 to %d", ErrInvalidPriority, prio, int64(MaxPriority))
	}
	return q.offer(ctx, itemPrefix(int64(prio), true), [][]byte{data}, -1)
}

// offer adds items to shard k (-1: the next one, round-robin).
func (q *Queue) offer(ctx context.Context, prefix string, items [][]byte, k int) error {
	total := 0
	for i, it := range items {
		switch {
		case it == nil:
			return fmt.Errorf("%w: item %d", ErrNilItem, i)
		case len(it) > q.o.maxItemSize:
			return fmt.Errorf("%w: item %d has %d bytes, over %d", ErrTooLarge, i, len(it), q.o.maxItemSize)
		}
		total += len(it) + len(q.shards[len(q.shards)-1].path) + len(prefix) + 64 // under the longest shard path
	}
	if len(items) > 1 && total > q.o.maxItemSize+1024 {
		return fmt.Errorf("%w: the batch's %d items need about %d bytes in one multi, over %d", ErrTooLarge, len(items), total, q.o.maxItemSize+1024)
	}
	if err := q.checkShards(ctx); err != nil {
		return err
	}
	if k < 0 {
		k = int((q.rr.Add(1) - 1) % uint64(len(q.shards)))
	}
	s := q.shards[k]
	ctx, span := s.tel.Start(ctx, "offer", trace.SpanKindProducer, append(s.attrs, attribute.String("messaging.operation.type", "send"),
		attribute.Int("messaging.batch.message_count", len(items)))...)
	defer span.End()
	_, err := s.shell.Do(ctx, func(req uint64) input { return offerCall{Req: req, Prefix: prefix, Items: items} })
	s.count(ctx, s.sent, "send", len(items), err)
	if err != nil {
		s.fail(span, err)
	}
	return err
}

// Peek returns the head item's data without removing it, or ErrEmpty at
// once when the queue is empty.
func (q *Queue) Peek(ctx context.Context) ([]byte, error) {
	t, _, err := q.take(ctx, kindPeek, "peek")
	return t.Data, err
}

// Poll removes and returns the head item, or returns ErrEmpty at once
// when the queue is empty.
func (q *Queue) Poll(ctx context.Context) ([]byte, error) {
	t, _, err := q.take(ctx, kindPoll, "poll")
	return t.Data, err
}

// Take removes and returns the head item, waiting for one until ctx ends.
//
// The item is removed before Take returns it: if the process dies before
// it is handled, it is gone. Use TakeItem when every item must be handled.
// Take delivers every item at most once, except in one case: when the
// reply to its delete is lost (the connection dropped meanwhile) and the
// item is gone afterwards, it cannot tell whether its delete or another
// consumer's removed it, and returns it (an item is never lost), with
// ErrUncertain on its TAKEN event.
//
// When ctx ends while the item is being taken, Take either returns the
// item or returns ctx's error and puts the item back at its place, under
// its own name (a create of the node it deleted; sent again after a
// connection loss). The same holds for Poll, and for TakeItem, whose
// claim is given back.
//
// A delete (TakeItem: a claim) the server refuses for the connection's
// identity returns an error matching zk.ErrNoAuth at once.
func (q *Queue) Take(ctx context.Context) ([]byte, error) {
	t, _, err := q.take(ctx, kindTake, "take")
	return t.Data, err
}

// TakeItem claims the head item, waiting for one until ctx ends, and
// returns it: it stays in the queue, claimed by this consumer's session,
// until Ack removes it or Nack gives it back. If this consumer's session
// ends first, the claim goes with it and the item is delivered again, to
// this consumer or another.
func (q *Queue) TakeItem(ctx context.Context) (*Item, error) {
	t, s, err := q.take(ctx, kindClaim, "take")
	if err != nil {
		return nil, err
	}
	return &Item{q: s, name: t.Name, data: t.Data, session: t.Session}, nil
}

// take makes a take of kind, and returns what it got and from which
// shard. It looks at the shards from its own on (see WithShards), and
// takes from the first that has an item; a sharded take or claim that
// finds none waits until one has (a wait on every shard, which takes
// nothing), and looks again.
func (q *Queue) take(ctx context.Context, kind takeKind, name string) (taken, *Queue, error) {
	if err := q.checkShards(ctx); err != nil {
		return taken{}, q, err
	}
	n, wait := len(q.shards), kind != kindPeek && kind != kindPoll
	for {
		for i := range n {
			s := q.shards[(q.own+i)%n]
			t, err := s.takeFrom(ctx, kind, name, wait && n > 1)
			if !errors.Is(err, ErrEmpty) {
				return t, s, err
			}
		}
		if !wait {
			return taken{}, nil, ErrEmpty
		}
		wctx, cancel := context.WithCancel(ctx)
		errs := make(chan error, n)
		for _, s := range q.shards {
			go func() {
				_, err := s.shell.Do(wctx, func(req uint64) input { return takeCall{Req: req, Kind: kindWait} })
				errs <- err
			}()
		}
		err := <-errs
		cancel()
		for range n - 1 {
			<-errs
		}
		if err != nil {
			return taken{}, nil, err
		}
	}
}

// takeFrom makes a take of kind on this (unsharded) queue. try: ErrEmpty
// at once when the cache has nothing (see takeCall).
func (q *Queue) takeFrom(ctx context.Context, kind takeKind, name string, try bool) (taken, error) {
	ctx, span := q.tel.Start(ctx, name, trace.SpanKindConsumer, append(q.attrs, attribute.String("messaging.operation.type", "receive"))...)
	defer span.End()
	a, err := q.shell.Do(ctx, func(req uint64) input { return takeCall{Req: req, Kind: kind, Try: try} })
	if kind != kindPeek && !errors.Is(err, ErrEmpty) {
		q.count(ctx, q.taken, "receive", 1, err)
	}
	if err != nil {
		if !errors.Is(err, ErrEmpty) {
			q.fail(span, err)
		}
		return taken{}, err
	}
	t := a.Value.(taken)
	span.SetAttributes(runtime.AttrNode.String(zk.Join(q.path, t.Name)))
	return t, nil
}

// Len returns the number of items, claimed ones included: one read of the
// queue's path (its child count; of each shard's), not a listing.
func (q *Queue) Len(ctx context.Context) (int, error) {
	if err := q.checkShards(ctx); err != nil {
		return 0, err
	}
	total := 0
	for _, s := range q.shards {
		a, err := s.shell.Do(ctx, func(req uint64) input { return lenCall{Req: req} })
		if err != nil {
			return 0, err
		}
		total += a.Value.(int)
	}
	return total, nil
}

// Close fails the calls waiting for items with ErrClosed, gives back the
// claims of items still out (they are delivered again), and stops the
// consumer. It waits at most the close timeout; claims it could not give
// back by then go to the connection, which deletes them when the same
// session reconnects, and Close returns ErrCleanupPending. Every later
// call returns the first one's result.
func (q *Queue) Close() error {
	if q.shell != nil {
		return q.shell.Close()
	}
	var errs []error // a sharded handle's: every shard's, then its bus
	for _, s := range q.shards {
		errs = append(errs, s.Close())
	}
	if q.bus != nil {
		q.bus.Close()
	}
	return errors.Join(errs...)
}

func (q *Queue) fail(span trace.Span, err error) { runtime.Fail(span, err, errorType(err)) }

// count adds n to c, by the messaging conventions' attributes (and
// error.type when err is set).
func (q *Queue) count(ctx context.Context, c metric.Int64Counter, op string, n int, err error) {
	kv := append([]attribute.KeyValue{attribute.String("messaging.operation.name", op)}, q.attrs...)
	if err != nil {
		kv = append(kv, runtime.AttrErrorType.String(errorType(err)))
	}
	c.Add(context.WithoutCancel(ctx), int64(n), metric.WithAttributes(kv...))
}

// Item is an item claimed by TakeItem. Its methods are safe for
// concurrent use.
type Item struct {
	q       *Queue
	name    string
	data    []byte
	session int64

	mu   sync.Mutex
	done bool
}

// Data is the item's data.
func (it *Item) Data() []byte { return it.data }

// Node is the item's node.
func (it *Item) Node() string { return zk.Join(it.q.path, it.name) }

// Ack removes the item and our claim on it, in one multi that checks the
// item's version our claim left: an Ack that reaches the server after
// another consumer claimed the item (sent on a session that ended, see
// the package doc) fails there. ErrClaimLost: the claim had gone (the
// session ended, or another consumer claimed the item since): the item
// is delivered again. ErrUncertain: the reply was lost and the session
// ended with it; the item will not be delivered again (see ErrUncertain).
// ErrAcked: Ack or Nack was called before. zk.ErrNoAuth: the server
// refused the removal for the connection's identity; nothing was applied,
// and the claim stays ours until Nack (or Close) gives the item back.
func (it *Item) Ack(ctx context.Context) error {
	_, err := it.end(ctx, false, false)
	return err
}

// Nack gives the item back: our claim is deleted and the item is
// delivered again at its place. Errors as Ack.
func (it *Item) Nack(ctx context.Context) error {
	_, err := it.end(ctx, true, false)
	return err
}

// end acks or nacks the item. With next, the same multi claims the item
// TakeItem would get now, if the handle's cache has it, and end returns it
// (nil: none; take one with TakeItem), even when the ack failed.
func (it *Item) end(ctx context.Context, nack, next bool) (*Item, error) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.done {
		return nil, fmt.Errorf("%w: %s", ErrAcked, it.Node())
	}
	name := "ack"
	if nack {
		name = "nack"
	}
	ctx, span := it.q.tel.Start(ctx, name, trace.SpanKindInternal, append(it.q.attrs, attribute.String("messaging.operation.type", "settle"),
		runtime.AttrNode.String(it.Node()))...)
	defer span.End()
	a, err := it.q.shell.Do(ctx, func(req uint64) input {
		return ackCall{Req: req, Name: it.name, Session: it.session, Nack: nack, Next: next}
	})
	if err == nil || errors.Is(err, ErrClaimLost) {
		it.done = true
	}
	if err != nil {
		it.q.fail(span, err)
	}
	t, ok := a.Value.(taken)
	if !ok || t.Name == "" {
		return nil, err
	}
	it.q.count(ctx, it.q.taken, "receive", 1, nil)
	span.SetAttributes(attrNextNode.String(zk.Join(it.q.path, t.Name)))
	return &Item{q: it.q, name: t.Name, data: t.Data, session: t.Session}, err
}

// attrNextNode is the item an ack's multi claimed for Consume's next call.
var attrNextNode = attribute.Key("zkrecipes.queue.next_node")

// errorType names err for a span's error.type: the queue's errors, then
// ZooKeeper's (runtime.ZKErrorType).
func errorType(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{ErrEmpty, "empty"}, {ErrTooLarge, "too_large"}, {ErrNilItem, "nil_item"},
		{ErrInvalidPriority, "invalid_priority"}, {ErrClaimLost, "claim_lost"}, {ErrAcked, "acked"},
		{ErrSessionLost, "session_lost"}, {ErrItemLost, "item_lost"}, {ErrClosed, "closed"},
		{ErrCleanupPending, "cleanup_pending"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return runtime.ZKErrorType(err)
}
