package testkit

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
)

// WaitEvent reads sub until an event of type typ arrives and returns it. It
// fails the test if sub closes first or no such event comes within 15 s.
func WaitEvent(t testing.TB, sub *events.Subscription, typ events.Type) events.Event {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription closed before %s", typ)
			}
			if ev.Type == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within 15s", typ)
		}
	}
}
