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
	case gozk.EventNodeDeleted:
		return []watchKind{kindExist, kindData, kindChild}
	}
	return nil
}

// inOrder delivers node events to the watch channels in the order the
// server sent them. go-zookeeper fills its own per-watch channels in order,
// but each is forwarded by its own goroutine, which would lose the order
// across watches: a caller watching two nodes could see the later event
// first. So the event callback — called on go-zookeeper's receive loop for
// every notification, in order — delivers to the registered channels
// itself; the forwarding goroutine delivers only what the callback did not
// (an event that came before the watch was registered here, or the end of
// the watch on expiry or close).
type inOrder struct {
	mu      sync.Mutex
	pending map[watchKey][]*pendingWatch
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

func (o *inOrder) register(path string, kind watchKind, p *pendingWatch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending == nil {
		o.pending = make(map[watchKey][]*pendingWatch)
	}
	k := watchKey{path, kind}
	o.pending[k] = append(o.pending[k], p)
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
