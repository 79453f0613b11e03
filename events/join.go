package events

import "sync"

// Source is what publishes lifecycle events: every recipe's handle.
type Source interface {
	Subscribe(opts ...SubscribeOption) *Subscription
}

// Joined is the bus of a handle made of other handles (a multi-lock, a
// read/write lock): its own START, then every event of its parts but
// theirs, each as its part published it.
type Joined struct {
	*Bus
	forward sync.WaitGroup // the goroutines that forward the parts' events
}

// Join publishes start on a new bus and forwards every event of parts to
// it until each part's subscriptions end (the part closed).
func Join(start Event, parts ...Source) *Joined {
	j := &Joined{Bus: NewBus()}
	j.Publish(start)
	for _, p := range parts {
		sub := p.Subscribe()
		j.forward.Go(func() {
			for ev := range sub.C {
				if ev.Type != Start {
					j.Publish(ev)
				}
			}
		})
	}
	return j
}

// Close ends the bus once every part's events were forwarded: call it
// after closing the parts.
func (j *Joined) Close() {
	j.forward.Wait()
	j.Bus.Close()
}
