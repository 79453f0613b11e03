package zk

import (
	"sync"

	gozk "github.com/go-zookeeper/zk"
)

// watchKind is which of go-zookeeper's watch tables a watch is in.
type watchKind int

const (
	kindData  watchKind = iota // GetW, and ExistsW on an existing node
	kindExist                  // ExistsW on a missing node
	kindChild                  // ChildrenW
)

// firedBy lists the watch kinds an event fires, as go-zookeeper's
// notifyWatches does.
func firedBy(t gozk.EventType) []watchKind {
	switch t {
	case gozk.EventNodeCreated:
		return []watchKind{kindExist}
	case gozk.EventNodeDataChanged:
		return []watchKind{kindExist, kindData}
	case gozk.EventNodeChildrenChanged:
		return []watchKind{kindChild}
	case gozk.EventNodeDeleted, gozk.EventNotWatching: // NotWatching: expiry or close ends every watch
		return []watchKind{kindExist, kindData, kindChild}
	}
	return nil
}

// inOrder delivers node events to the watch channels in the order the
// server sent them, with no goroutine per watch: the event callback,
// called on go-zookeeper's receive loop for every notification (and for
// the end of every watch on expiry or close), in order, delivers to the
// registered channels itself. go-zookeeper registers a watch when the
// request's reply comes, on that loop, and the caller registers it here
// after; an event on the path in between reaches only go-zookeeper's own
// channel of the watch. So the events on a path are counted while a watch
// request on it is out, and a watch that an event may have passed so
// (rare: a change of the node just as it is watched) is forwarded from
// go-zookeeper's channel by a goroutine too.
type inOrder struct {
	mu      sync.Mutex
	pending map[watchKey][]*pendingWatch
	out     map[string]int    // watch requests out, per path
	seen    map[string]uint64 // events on a path while a request on it is out
}

type watchKey struct {
	path string
	kind watchKind
}

// pendingWatch is one watch channel; deliver sends its one event, once.
type pendingWatch struct {
	once  sync.Once
	out   chan WatchEvent
	fired func()              // called once, before the event is sent
	rel   func(string) string // the path the event carries (see WithChroot)
}

func (p *pendingWatch) deliver(ev gozk.Event) {
	p.once.Do(func() {
		p.fired()
		w := watchEvent(ev)
		if w.Path != "" {
			w.Path = p.rel(w.Path)
		}
		p.out <- w
		close(p.out)
	})
}

// expect notes a watch request on path about to be sent; settle ends it
// with the ticket it returns.
func (o *inOrder) expect(path string) (ticket uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out == nil {
		o.pending, o.out, o.seen = make(map[watchKey][]*pendingWatch), make(map[string]int), make(map[string]uint64)
	}
	o.out[path]++
	return o.seen[path]
}

// settle ends a watch request on path (expect's ticket): p, if not nil,
// is registered, and settle reports whether an event on path came while
// the request was out (it may have been p's: forward go-zookeeper's
// channel too).
func (o *inOrder) settle(path string, ticket uint64, kind watchKind, p *pendingWatch) (passed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	passed = o.seen[path] != ticket
	if o.out[path]--; o.out[path] == 0 {
		delete(o.out, path)
		delete(o.seen, path)
	}
	if p != nil {
		k := watchKey{path, kind}
		o.pending[k] = append(o.pending[k], p)
	}
	return passed
}

func (o *inOrder) unregister(path string, kind watchKind, p *pendingWatch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := watchKey{path, kind}
	ws := o.pending[k]
	for i, w := range ws {
		if w == p {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(o.pending, k)
	} else {
		o.pending[k] = ws
	}
}

// fire delivers a node event to every registered watch it fires. It runs
// on go-zookeeper's receive loop and never blocks (channels have room for
// their one event).
func (o *inOrder) fire(ev gozk.Event) {
	o.mu.Lock()
	if _, ok := o.out[ev.Path]; ok {
		o.seen[ev.Path]++
	}
	var fired []*pendingWatch
	for _, kind := range firedBy(ev.Type) {
		k := watchKey{ev.Path, kind}
		fired = append(fired, o.pending[k]...)
		delete(o.pending, k)
	}
	o.mu.Unlock()
	for _, p := range fired {
		p.deliver(ev)
	}
}
