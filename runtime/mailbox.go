package runtime

import "sync"

// Mailbox is an unbounded FIFO queue. Put never blocks, so it can be called
// from callbacks that must not block (go-zookeeper's event callback, timer
// funcs, other actors). The zero value is ready to use.
type Mailbox[M any] struct {
	mu     sync.Mutex
	items  []M
	ready  chan struct{}
	closed bool
}

func (b *Mailbox[M]) init() {
	if b.ready == nil {
		b.ready = make(chan struct{}, 1)
	}
}

// Put appends m. It reports false, and drops m, once the mailbox is closed.
func (b *Mailbox[M]) Put(m M) bool {
	b.mu.Lock()
	b.init()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.items = append(b.items, m)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
	return true
}

// Ready is signalled (capacity 1) whenever Put adds to an empty or
// non-empty mailbox; after it fires, Take returns everything queued.
func (b *Mailbox[M]) Ready() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.ready
}

// Take removes and returns everything queued, oldest first.
func (b *Mailbox[M]) Take() []M {
	b.mu.Lock()
	defer b.mu.Unlock()
	items := b.items
	b.items = nil
	return items
}

// Close makes every later Put fail. Queued messages stay for Take.
func (b *Mailbox[M]) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}
