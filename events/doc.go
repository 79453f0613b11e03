// Package events is what a recipe tells the world about itself: its
// lifecycle events, the states and event types they name, and the Bus
// that carries them to subscribers.
//
// # Events
//
// An Event is one step of one recipe instance: a lock offering its node,
// being granted, losing its session; a queue item offered, taken, acked;
// a two-phase transaction committed. It says which instance (Recipe, Path,
// Instance), what happened (Type), the machine's State after it, and what
// is known of it then: Node, Token (the fencing token), Term (which
// acquisition of the instance), SessionID, Err (the cause of FAILED and
// LOST), and the span it happened under (TraceID, SpanID).
//
// Every recipe's machine uses the same States, START, OFFER, DETERMINE,
// READY, LEADER, FAILED and STOP, those of ZooKeeper's
// LeaderElectionSupport, each the subset it needs (a queue has no OFFER or
// LEADER). Types are START; the _START/_COMPLETE pairs of the contention
// engine's phases; FAILED; the session's SUSPENDED, RECONNECTED and LOST;
// and the events of one recipe family (OFFERED, TAKEN, CLAIMED, ... for
// queues, ENTERED and LEFT for barriers, PREPARED, VOTED, COMMITTED and
// ABORTED for two-phase commit). Phase says what an event means for the
// instance's term (begun, granted, failed, ended) whatever its type, so
// that an observer can time terms of any recipe.
//
// # How recipes publish
//
// A recipe's pure machine returns the events of each step with their Type,
// Phase, State, Term, Node, Token and Err; the runtime's Shell adds the
// time, the recipe, path and instance, the session and the trace, and
// publishes them on the instance's Bus in the order they happened. Every
// handle's Subscribe is that Bus's: its first event is the instance's
// START, however late the subscription is made.
//
// # Bus and Subscription
//
// Publish never blocks the actor that publishes: each Subscription has a
// queue of its own and a goroutine that feeds its channel C, in publish
// order. A slow subscriber delays no one but itself. By default its queue
// is unbounded, so it misses nothing and holds events in memory until it
// reads them; with WithBuffer(n) the queue keeps at most n, and when the
// subscriber falls further behind the oldest events are dropped and one
// OVERFLOW event, whose Missed counts them, is delivered in their place.
// C is closed after Subscription.Close, or once the bus is closed (the
// handle's Close) and every queued event was received.
//
// A subscriber reads C until it closes:
//
//	sub := l.Subscribe(events.WithBuffer(256)) // l is a lock.Lock; any handle has Subscribe
//	defer sub.Close()
//	for ev := range sub.C {
//		switch ev.Type {
//		case events.ElectedComplete: // granted
//			log.Printf("held %s, token %#x", ev.Node, ev.Token)
//		case events.Lost, events.Failed:
//			log.Printf("%s: %v", ev.Type, ev.Err)
//		case events.Overflow:
//			log.Printf("missed %d events", ev.Missed)
//		}
//	}
//
// Package observers has subscribers ready made: metrics, logs and a
// timeline.
package events
