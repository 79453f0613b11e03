package events

import "sync"

// Bus fans events out to subscribers. Publish never blocks: every
// subscription has its own queue and its own goroutine that feeds C. A queue
// is unbounded unless the subscriber asked for a bound (WithBuffer); past the
// bound the oldest events are dropped and the subscriber receives one
// OVERFLOW event, in their place, saying how many it missed.
//
// The zero Bus is not usable; use NewBus.
type Bus struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
	start  *Event // the first START published: every later subscription gets it first
	init   *Event // the first INITIALIZED published: every later subscription gets it next
}

// NewBus returns an open bus.
func NewBus() *Bus { return &Bus{subs: make(map[*Subscription]struct{})} }

// SubscribeOption configures a subscription.
type SubscribeOption func(*Subscription)

// WithBuffer bounds the subscription's queue to n events (at least 2). When the
// subscriber falls more than n behind, the oldest queued events are replaced
// by one OVERFLOW event carrying the count. The default is unbounded.
func WithBuffer(n int) SubscribeOption {
	return func(s *Subscription) {
		if n < 2 {
			n = 2
		}
		s.bound = n
	}
}

// Subscription receives a bus's events on C, in publish order. C is closed
// after Close, or after the bus closes and every queued event was received.
type Subscription struct {
	C <-chan Event

	c      chan Event
	bound  int
	mu     sync.Mutex
	queue  []Event
	wake   chan struct{}
	done   chan struct{} // closed by Close
	ended  bool          // the bus closed: deliver what is queued, then close C
	exited chan struct{}
	once   sync.Once
	bus    *Bus
}

// Subscribe starts a subscription. It gets the bus's START event first,
// when one was published (so every subscriber learns, once, the recipe,
// path and instance it follows), then its INITIALIZED, when one was
// published (a cache's first load is done), then the events published
// from now on;
// a subscription made after the bus closed has C closed at once.
func (b *Bus) Subscribe(opts ...SubscribeOption) *Subscription {
	c := make(chan Event)
	s := &Subscription{C: c, c: c, wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{}), bus: b}
	for _, o := range opts {
		o(s)
	}
	b.mu.Lock()
	if b.closed {
		s.ended = true
	} else {
		b.subs[s] = struct{}{}
		if b.start != nil {
			s.push(*b.start)
		}
		if b.init != nil {
			s.push(*b.init)
		}
	}
	b.mu.Unlock()
	go s.pump()
	return s
}

// Publish queues ev for every subscriber. It never blocks.
func (b *Bus) Publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ev.Type == Start && b.start == nil {
		b.start = &ev
	}
	if ev.Type == Initialized && b.init == nil {
		b.init = &ev
	}
	for s := range b.subs {
		s.push(ev)
	}
}

// Close ends the bus: each subscription delivers what it has queued and
// then closes its C.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
		s.signal()
	}
	b.subs = nil
}

func (s *Subscription) push(ev Event) {
	s.mu.Lock()
	for s.bound > 0 && len(s.queue) >= s.bound {
		// Full: the oldest queued event gives way. The queue's head becomes
		// (or stays) the OVERFLOW marker that counts what was dropped.
		if s.queue[0].Type == Overflow {
			s.queue[0].Missed++
			s.queue = append(s.queue[:1], s.queue[2:]...)
		} else {
			s.queue[0] = Event{Time: ev.Time, Recipe: ev.Recipe, Path: ev.Path, Instance: ev.Instance, Type: Overflow, Missed: 1}
		}
	}
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Subscription) pump() {
	defer close(s.exited)
	defer close(s.c)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			ended := s.ended
			s.mu.Unlock()
			if ended {
				return
			}
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		ev := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		select {
		case s.c <- ev:
		case <-s.done:
			return
		}
	}
}

// Close stops the subscription: no more events are delivered and C is
// closed. It returns once the subscription's goroutine has ended. Safe to
// call more than once.
func (s *Subscription) Close() {
	s.once.Do(func() {
		if b := s.bus; b != nil {
			b.mu.Lock()
			delete(b.subs, s)
			b.mu.Unlock()
		}
		close(s.done)
	})
	<-s.exited
}
