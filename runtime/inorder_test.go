package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// A command made with GoInOrder starts its requests only once the one
// made with GoInOrder before it has posted its reply, so the machine gets
// their replies in the order it made the commands.
func TestGoInOrderStartsACommandAfterThePreviousOnePosted(t *testing.T) {
	conn := sim.New().Connect()
	defer conn.Close()
	slowRunning := make(chan struct{}) // the first command's requests began
	fastMade := make(chan struct{})    // exec was asked for the second command
	fastStarted := make(chan struct{}) // the second command's requests began
	sh := Run[probeIn, check](conn, &probeMachine{state: events.StateStart, waiting: map[uint64]uint64{}}, Spec[probeIn, check]{
		Recipe: "probe", Path: "/", Instance: "p1",
		Exec: func(s *Shell[probeIn, check], c check, op Op) {
			if c.path == "/fast" {
				close(fastMade)
			}
			s.GoInOrder(func(ctx context.Context) (probeIn, bool) {
				if c.path == "/fast" {
					close(fastStarted)
					return checked{cmd: c.id}, true
				}
				close(slowRunning)
				<-fastMade
				select {
				case <-fastStarted:
					t.Error("the second command started before the first posted its reply")
				case <-time.After(50 * time.Millisecond): // time enough for it to start, were it not held
				}
				return checked{cmd: c.id}, true
			})
		},
		ErrorType: func(error) string { return "_OTHER" },
		Closed:    errProbeClosed,
	})
	defer sh.Stop()
	slow := make(chan error, 1)
	go func() {
		_, err := sh.Do(context.Background(), func(req uint64) probeIn { return ask{req: req, path: "/slow"} })
		slow <- err
	}()
	<-slowRunning
	if _, err := sh.Do(context.Background(), func(req uint64) probeIn { return ask{req: req, path: "/fast"} }); err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}
