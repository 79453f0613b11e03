package observers

import "github.com/zkrecipes/zkrecipes/events"

// Source hands out subscriptions to lifecycle events. *lock.Lock,
// *election.Election and *events.Bus are Sources.
type Source interface {
	Subscribe(opts ...events.SubscribeOption) *events.Subscription
}

// Bounded returns a Source whose subscriptions queue at most n events
// (events.WithBuffer). An observer on it that falls more than n events
// behind receives one OVERFLOW event counting what it missed, and reports
// it. Without it, an observer's queue is unbounded: nothing is missed, and
// a stalled observer (a blocked log writer) holds every event in memory.
func Bounded(src Source, n int) Source { return bounded{src, n} }

type bounded struct {
	src Source
	n   int
}

func (b bounded) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return b.src.Subscribe(append(opts, events.WithBuffer(b.n))...)
}

// Observer is one subscription and the goroutine that consumes it. It never
// slows the recipe it watches: the bus queues events for it. It stops when
// Close is called, when the source closes the subscription (the recipe was
// closed) once every queued event was handled, or at its first error (a
// failed write).
type Observer struct {
	sub  *events.Subscription
	done chan struct{}
	err  error // set before done closes
}

// start subscribes to src and hands every event to handle, in order, on one
// new goroutine.
func start(src Source, handle func(events.Event) error) *Observer {
	o := &Observer{sub: src.Subscribe(), done: make(chan struct{})}
	go o.run(handle)
	return o
}

func (o *Observer) run(handle func(events.Event) error) {
	defer close(o.done)
	for ev := range o.sub.C {
		if err := handle(ev); err != nil {
			o.err = err
			o.sub.Close()
			return
		}
	}
}

// Done is closed once the observer has stopped. To observe every event of
// a recipe, close the recipe and then wait on Done: the observer handles
// what was queued and stops.
func (o *Observer) Done() <-chan struct{} { return o.done }

// Err is the error that stopped the observer, or nil (also while it runs).
func (o *Observer) Err() error {
	select {
	case <-o.done:
		return o.err
	default:
		return nil
	}
}

// Close stops the observer at once (events still queued for it are not
// handled), waits for its goroutine to end, and returns Err. Safe to call
// more than once.
func (o *Observer) Close() error {
	o.sub.Close()
	<-o.done
	return o.err
}
