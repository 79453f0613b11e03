package queue

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// MaxShards is the most shards WithShards accepts.
const MaxShards = 256

// ErrShardsMismatch: the queue's path records another number of shards
// than the handle's (WithShards; an unsharded queue records none). Nothing
// was sent but the reads of the path.
var ErrShardsMismatch = errors.New("queue: shards mismatch")

// WithShards spreads the queue's items over n sub-queues, <path>/shard-<k>
// for k from 0 to n-1, each laid out as an unsharded queue, for
// throughput: consumers on different shards do not race for the same
// items. n is recorded as the path's data (the first handle creates the
// path with it); a handle with another n gets ErrShardsMismatch. Offer,
// OfferBatch and OfferPriority go round-robin over the shards, per handle;
// OfferKey sends a key's items to one shard, so they keep their order.
// A consumer starts at its own shard (chosen by its id) and moves to the
// next when that one has nothing to take; it waits on all of them. Order
// holds within a shard (see the package doc), not across shards. Default
// 1: the unsharded layout, Curator's.
func WithShards(n int) Option { return func(o *options) { o.shards = n } }

// newSharded returns a handle on the queue at path with o.shards shards.
func newSharded(conn zk.Conn, path string, o options) (*Queue, error) {
	h := fnv.New32a()
	h.Write([]byte(o.id))
	q := &Queue{conn: conn, path: path, o: o, own: int(h.Sum32() % uint32(o.shards))}
	parts := make([]events.Source, o.shards)
	for k := range o.shards {
		s, err := newQueue(conn, zk.Join(path, fmt.Sprintf("shard-%d", k)), o, true) // the path's record is checked for all
		if err != nil {
			q.Close()
			return nil, err
		}
		q.shards, parts[k] = append(q.shards, s), s
	}
	q.bus = events.Join(events.Event{Type: events.Start, State: events.StateStart, Instance: o.id}, parts...)
	return q, nil
}

// checkShards makes sure the path records our number of shards, once per
// handle, as the semaphore does its maxLeases: an unsharded handle accepts
// a path that is missing or records nothing; a sharded one creates the
// path with its number, or records it on a path that records nothing.
func (q *Queue) checkShards(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.checked {
		return nil
	}
	want := strconv.Itoa(q.o.shards)
	ctx = runtime.Expect(ctx, zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion)
	for {
		data, st, err := q.conn.Get(ctx, q.path)
		switch {
		case (errors.Is(err, zk.ErrNoNode) || err == nil && len(data) == 0) && q.o.shards == 1:
			data, err = []byte(want), nil
		case errors.Is(err, zk.ErrNoNode):
			data = []byte(want)
			if err = zk.EnsurePath(ctx, q.conn, zk.Parent(q.path), zk.ModePersistent); err == nil {
				_, err = q.conn.Create(ctx, q.path, data, zk.ModePersistent)
			}
		case err == nil && len(data) == 0:
			data = []byte(want)
			_, err = q.conn.Set(ctx, q.path, data, st.Version)
		}
		switch {
		case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion),
			errors.Is(err, zk.ErrConnectionLoss) && ctx.Err() == nil:
			continue // changed meanwhile, or a reply lost: read it again
		case errors.Is(err, zk.ErrClosed):
			return fmt.Errorf("%w: %w", ErrClosed, err)
		case err != nil:
			return err
		case string(data) != want:
			return fmt.Errorf("%w: %s records %q shards, we have %d", ErrShardsMismatch, q.path, data, q.o.shards)
		}
		q.checked = true
		return nil
	}
}

// OfferKey adds data at the tail of the shard of key (see WithShards), so
// that the items of one key keep their order. On an unsharded queue it is
// Offer.
func (q *Queue) OfferKey(ctx context.Context, key string, data []byte) error {
	h := fnv.New32a()
	h.Write([]byte(key))
	return q.offer(ctx, itemPrefix(0, false), [][]byte{data}, int(h.Sum32()%uint32(len(q.shards))))
}
