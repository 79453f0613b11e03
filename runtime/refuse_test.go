package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// dealer is a machine that hands out numbered tickets, one per call: a
// ticket is a resource its caller must not lose. A call is answered in
// its own step (deal) or once a command made for it comes back (later);
// ping answers at once. A ticket no caller took comes back as returned.

type dealerIn = any

type deal struct{ req uint64 }
type later struct{ req uint64 }
type dealt struct{ cmd, req uint64 }
type ping struct{ req uint64 }
type returned struct{ ticket int }
type end struct{}

type dealCmd struct{ id, req uint64 }

func (c dealCmd) ID() uint64 { return c.id }

type dealerMachine struct {
	next     int
	cmds     uint64
	inStep   func()   // called in the step that answers deal
	returned chan int // the tickets handed back
}

// handedBack is the next ticket handed back.
func (m *dealerMachine) handedBack(t *testing.T) int {
	t.Helper()
	select {
	case n := <-m.returned:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no ticket handed back")
		return 0
	}
}

func (m *dealerMachine) State() events.State    { return events.StateReady }
func (m *dealerMachine) Start() Output[dealCmd] { return Output[dealCmd]{} }

func (m *dealerMachine) Step(in dealerIn) Output[dealCmd] {
	var out Output[dealCmd]
	switch in := in.(type) {
	case deal:
		m.inStep()
		m.next++
		out.Replies = append(out.Replies, Reply{Req: in.req, Value: m.next})
	case later:
		m.cmds++
		out.Commands = append(out.Commands, dealCmd{id: m.cmds, req: in.req})
	case dealt:
		m.next++
		out.Replies = append(out.Replies, Reply{Req: in.req, Value: m.next})
	case ping:
		out.Replies = append(out.Replies, Reply{Req: in.req, Value: m.next}) // the tickets dealt so far
	case returned:
		m.returned <- in.ticket
	case end:
		out.Done = true
	}
	return out
}

// runDealer runs a dealer whose later commands are answered once gate is
// closed; made is told of each.
func runDealer(t *testing.T, m *dealerMachine, gate <-chan struct{}, made chan<- struct{}) *Shell[dealerIn, dealCmd] {
	return runDealerWithdrawing(t, m, gate, made, false)
}

// runDealerWithdrawing is runDealer; with withdraw, a call whose caller
// gave up is withdrawn (Spec.Withdraw), and the dealer never answers it.
func runDealerWithdrawing(t *testing.T, m *dealerMachine, gate <-chan struct{}, made chan<- struct{}, withdraw bool) *Shell[dealerIn, dealCmd] {
	s := sim.New()
	conn := s.Connect()
	t.Cleanup(func() { conn.Close() })
	sh := Run[dealerIn, dealCmd](conn, m, Spec[dealerIn, dealCmd]{
		Recipe: "dealer", Path: "/", Instance: "d1",
		Exec: func(s *Shell[dealerIn, dealCmd], c dealCmd, _ Op) {
			made <- struct{}{}
			s.Go(func(ctx context.Context) (dealerIn, bool) {
				select {
				case <-gate:
					return dealt{cmd: c.id, req: c.req}, true
				case <-ctx.Done():
					return nil, false
				}
			})
		},
		Withdraw: func(dealerIn) bool { return withdraw },
		Refused: func(_ dealerIn, r Reply) (dealerIn, bool) {
			n, ok := r.Value.(int)
			return returned{ticket: n}, ok
		},
		ErrorType: func(error) string { return "_OTHER" },
		Closed:    errProbeClosed,
	})
	t.Cleanup(sh.Stop)
	return sh
}

// giveUpLater makes a later call and gives it up once its command is
// made (made is told).
func giveUpLater(t *testing.T, sh *Shell[dealerIn, dealCmd], made <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sh.Do(ctx, func(req uint64) dealerIn { return later{req: req} })
		done <- err
	}()
	<-made
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Do = %v, want Canceled", err)
	}
}

// An answer the machine gives after its caller stopped waiting is handed
// back to the machine (Spec.Refused), not dropped.
func TestAnswerAfterTheCallerGaveUpIsRefused(t *testing.T) {
	gate := make(chan struct{})
	m := &dealerMachine{inStep: func() {}, returned: make(chan int, 1)}
	made := make(chan struct{}, 1)
	sh := runDealer(t, m, gate, made)
	giveUpLater(t, sh, made)
	// The mailbox is in order: once ping is answered, the actor knows
	// the caller is gone.
	if _, err := sh.Do(context.Background(), func(req uint64) dealerIn { return ping{req: req} }); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if n := m.handedBack(t); n != 1 {
		t.Fatalf("ticket handed back: %d, want 1", n)
	}
}

// An answer given just as the caller stopped waiting, and never read, is
// handed back too: the caller gave up after its last look, then the
// answer came.
func TestAnswerUnreadWhenTheCallerGaveUpIsRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	m := &dealerMachine{returned: make(chan int, 1)}
	// The step that answers first lets the caller give up, and waits
	// until it has: the answer then goes to a caller that is gone.
	m.inStep = func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Do = %v, want Canceled", err)
		}
	}
	sh := runDealer(t, m, nil, nil)
	go func() {
		_, err := sh.Do(ctx, func(req uint64) dealerIn { return deal{req: req} })
		done <- err
	}()
	if n := m.handedBack(t); n != 1 {
		t.Fatalf("ticket handed back: %d, want 1", n)
	}
}

// Every answer is either taken by its caller or handed back, whenever
// the caller's ctx ends: never lost, never both.
func TestEveryAnswerTakenOrRefused(t *testing.T) {
	m := &dealerMachine{inStep: func() {}, returned: make(chan int, 1000)}
	sh := runDealer(t, m, nil, nil)
	taken := map[int]bool{}
	const calls = 1000
	for i := range calls {
		ctx, cancel := context.WithCancel(context.Background())
		if i%2 == 0 {
			go cancel() // races the answer
		}
		a, err := sh.Do(ctx, func(req uint64) dealerIn { return deal{req: req} })
		cancel()
		if err == nil {
			taken[a.Value.(int)] = true
		}
	}
	// A call whose ctx ended before it was sent was dealt nothing; each
	// ticket dealt is taken or on its way back.
	a, err := sh.Do(context.Background(), func(req uint64) dealerIn { return ping{req: req} })
	if err != nil {
		t.Fatal(err)
	}
	dealt := a.Value.(int)
	for len(taken) < dealt {
		n := m.handedBack(t)
		if taken[n] {
			t.Fatalf("ticket %d both taken and handed back", n)
		}
		taken[n] = true
	}
	if len(taken) != dealt || dealt < calls/2 {
		t.Fatalf("%d tickets dealt for %d calls, %d taken or handed back", dealt, calls, len(taken))
	}
}

// A withdrawn call that the machine never answers is forgotten by the
// shell: a handle whose callers give up again and again (a Take with a
// timeout, in a loop, on an empty queue) does not grow.
func TestWithdrawnCallsAreForgotten(t *testing.T) {
	m := &dealerMachine{inStep: func() {}, returned: make(chan int, 1)}
	made := make(chan struct{}, 1)
	sh := runDealerWithdrawing(t, m, make(chan struct{}), made, true)
	for range 100 {
		giveUpLater(t, sh, made)
	}
	if _, err := sh.Do(context.Background(), func(req uint64) dealerIn { return ping{req: req} }); err != nil {
		t.Fatal(err)
	}
	sh.Stop() // the actor's maps may be read once it has stopped
	if n := len(sh.calls); n != 0 {
		t.Fatalf("%d withdrawn calls still kept", n)
	}
}

// An answer refused just before an input that ends the machine (a Close
// right after a call gave up) is handed back before that input: the
// machine still has what the answer gave to give back.
func TestRefusedBeforeTheMachineEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	m := &dealerMachine{returned: make(chan int, 1)}
	var sh *Shell[dealerIn, dealCmd]
	ready := make(chan struct{})
	m.inStep = func() {
		cancel()
		<-done // the caller gave up: its gone message is queued
		<-ready
		sh.Post(context.Background(), end{}, false) // behind it
	}
	sh = runDealer(t, m, nil, nil)
	close(ready)
	go func() {
		_, err := sh.Do(ctx, func(req uint64) dealerIn { return deal{req: req} })
		done <- err
	}()
	if n := m.handedBack(t); n != 1 {
		t.Fatalf("ticket handed back: %d, want 1", n)
	}
}
