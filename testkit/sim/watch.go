package sim

import (
	"cmp"
	"slices"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// watchKind is the kind of a client-side watch registration, as
// go-zookeeper keeps them: GetW and ExistsW on an existing node leave a data
// watch, ExistsW on a missing node an exist watch, ChildrenW a child watch.
type watchKind uint8

const (
	watchData watchKind = iota
	watchExist
	watchChild
)

type watchKey struct {
	path string
	kind watchKind
}

// kindsFired lists the watch kinds an event is delivered to (go-zookeeper's
// fan-out of one server notification): Created → exist; DataChanged → exist,
// data; ChildrenChanged → child; Deleted → all three.
func kindsFired(typ zk.EventType) []watchKind {
	switch typ {
	case zk.EventNodeCreated:
		return []watchKind{watchExist}
	case zk.EventNodeDataChanged:
		return []watchKind{watchExist, watchData}
	case zk.EventNodeChildrenChanged:
		return []watchKind{watchChild}
	}
	return []watchKind{watchExist, watchData, watchChild}
}

// watcher is one watch's channel and the rewrite of its event's path
// that a chroot view asked for (zk.RewriteWatchPath).
type watcher struct {
	ch  chan zk.WatchEvent
	rel func(path string) string
}

// event is the event ev as w delivers it.
func (w watcher) event(ev zk.WatchEvent) zk.WatchEvent {
	ev.Path = w.rel(ev.Path)
	return ev
}

// watch registers a one-shot watch for c and returns its channel; its
// event's path is rewritten by rel.
func (c *simConn) watch(path string, kind watchKind, rel func(string) string) <-chan zk.WatchEvent {
	w := watcher{ch: make(chan zk.WatchEvent, 1), rel: rel}
	k := watchKey{path, kind}
	c.watches[k] = append(c.watches[k], w)
	return w.ch
}

// fire delivers one notification (path, typ) to every channel of c that it
// matches; each such watch is spent.
func (c *simConn) fire(path string, typ zk.EventType) {
	for _, kind := range kindsFired(typ) {
		k := watchKey{path, kind}
		for _, w := range c.watches[k] {
			c.post(delivery{w: w, key: k, watch: w.event(zk.WatchEvent{Type: typ, Path: path})})
		}
		delete(c.watches, k)
	}
}

// trigger fires (path, typ) on every session connected now. A session
// without a connection misses it; its watches are replayed when it
// reconnects.
func (s *Sim) trigger(path string, typ zk.EventType) {
	for _, c := range s.conns {
		if c.online() {
			c.fire(path, typ)
		}
	}
}

// sortedWatches lists c's watch keys by kind, then path.
func (c *simConn) sortedWatches() []watchKey {
	keys := make([]watchKey, 0, len(c.watches))
	for k := range c.watches {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b watchKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.path, b.path))
	})
	return keys
}

// replay does what the server does with the SetWatches a reconnecting
// client sends with the last zxid it saw (DataTree.setWatches), grouped by
// kind: a data watch fires Deleted if the node is gone or DataChanged if it
// changed since; an exist watch fires Created if the node exists; a child
// watch fires Deleted if the node is gone or ChildrenChanged if its pzxid
// moved since. Every other watch stays armed. The state is compared, not the
// history: a node deleted and re-created reads as DataChanged, a node
// created and deleted in the gap as nothing.
func (c *simConn) replay() {
	rel := c.lastZxid
	for _, k := range c.sortedWatches() {
		if _, armed := c.watches[k]; !armed {
			continue // spent by an earlier notification's fan-out
		}
		n := c.s.nodes[k.path]
		switch {
		case k.kind == watchExist && n != nil:
			c.fire(k.path, zk.EventNodeCreated)
		case k.kind == watchExist:
		case n == nil:
			c.fire(k.path, zk.EventNodeDeleted)
		case k.kind == watchData && n.mzxid > rel:
			c.fire(k.path, zk.EventNodeDataChanged)
		case k.kind == watchChild && n.pzxid > rel:
			c.fire(k.path, zk.EventNodeChildrenChanged)
		}
	}
}

// dropWatches ends every watch of c with EventNotWatching and err.
func (c *simConn) dropWatches(err error) {
	for _, k := range c.sortedWatches() {
		for _, w := range c.watches[k] {
			c.post(delivery{w: w, watch: w.event(zk.WatchEvent{Type: zk.EventNotWatching, Path: k.path, Err: err})})
		}
	}
	clear(c.watches)
}

// delivery is one thing to hand to c's user: a watch event for the channel
// of a watch (key), or a session event for the subscribers.
type delivery struct {
	w       watcher
	key     watchKey
	watch   zk.WatchEvent
	session zk.SessionEvent
}

// post queues d for c, in order. Called with the sim's lock held; d is
// handed over by deliver, without the lock. A watch event that comes while
// a reply is held waits with it, as it would on the connection.
func (c *simConn) post(d delivery) {
	if d.w.ch != nil && len(c.holds) > 0 {
		c.parked = append(c.parked, d)
		return
	}
	if !c.queued {
		c.queued = true
		c.s.pending = append(c.s.pending, c)
	}
	c.outbox = append(c.outbox, d)
}

// emit queues a session state change for c's subscribers.
func (c *simConn) emit(state zk.SessionState, session int64) {
	c.post(delivery{session: zk.SessionEvent{State: state, SessionID: session, Time: c.s.now()}})
}

// deliver hands every queued delivery to its conn's user. Each conn's
// deliveries are made in order by one goroutine at a time; a caller returns
// only once what it queued has been handed over (by itself or by a
// goroutine delivering at the same time). It must be called without the
// sim's lock, so subscribers never run under it.
func (s *Sim) deliver() {
	s.mu.Lock()
	conns := s.pending
	s.pending = nil
	for _, c := range conns {
		c.queued = false
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.flush()
	}
}

func (c *simConn) flush() {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	for {
		c.s.mu.Lock()
		if len(c.outbox) == 0 {
			c.s.mu.Unlock()
			return
		}
		d := c.outbox[0]
		c.outbox = c.outbox[1:]
		var subs []func(zk.SessionEvent)
		if d.w.ch == nil {
			subs = make([]func(zk.SessionEvent), 0, len(c.subs))
			for _, sub := range c.subs {
				subs = append(subs, sub.fn)
			}
		}
		c.s.mu.Unlock()
		if d.w.ch != nil {
			d.w.ch <- d.watch // capacity 1, never used before: does not block
			close(d.w.ch)
			continue
		}
		for _, fn := range subs {
			fn(d.session)
		}
	}
}
