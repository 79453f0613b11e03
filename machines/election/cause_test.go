package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestRunSeesWhyItsTermEnded runs a leader's function, ends the term in
// each way there is, and checks what the function and Run's caller see:
// the function's ctx carries the term (TermFrom) and, once cancelled, the
// cause; Run returns the cause, not the nil the function returned; and
// Term.Err says the same.
func TestRunSeesWhyItsTermEnded(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []election.Option
		end  func(t *testing.T, tg testkit.Target, c, other zk.Conn, e *election.Election, term *election.Term)
		want error
		then func(t *testing.T, tg testkit.Target, c zk.Conn)
	}{
		{"suspended", nil, func(t *testing.T, tg testkit.Target, c, _ zk.Conn, _ *election.Election, _ *election.Term) {
			tg.Disconnect(t, c)
		}, election.ErrSuspended, func(t *testing.T, tg testkit.Target, c zk.Conn) { tg.Reconnect(t, c) }},
		{"expired", []election.Option{election.WithSuspendedIsLost(false)}, func(t *testing.T, tg testkit.Target, c, _ zk.Conn, _ *election.Election, _ *election.Term) {
			tg.Expire(t, c)
		}, election.ErrSessionLost, nil},
		{"node deleted", nil, func(t *testing.T, _ testkit.Target, _, other zk.Conn, _ *election.Election, term *election.Term) {
			if err := other.Delete(ctxT(t), term.Node(), zk.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}, election.ErrNodeDeleted, nil},
		{"resign", nil, func(t *testing.T, _ testkit.Target, _, _ zk.Conn, e *election.Election, _ *election.Term) {
			if err := e.Resign(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}, election.ErrResigned, nil},
		{"close", nil, func(t *testing.T, _ testkit.Target, _, _ zk.Conn, e *election.Election, _ *election.Term) {
			go e.Close() // Close waits for Run's resign; Run waits for fn
		}, election.ErrClosed, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
				c, other := tg.Connect(t), tg.Connect(t)
				e := newElection(t, c, "/cause/election", "a", tc.opts...)
				type seen struct {
					term  *election.Term
					cause error
				}
				inFn := make(chan *election.Term, 1)
				got := make(chan seen, 1)
				ran := make(chan error, 1)
				go func() {
					ran <- e.Run(ctxT(t), func(ctx context.Context) error {
						term := election.TermFrom(ctx)
						inFn <- term
						<-ctx.Done()
						got <- seen{term, context.Cause(ctx)}
						return nil // as many a leader's loop does
					})
				}()
				var term *election.Term
				select {
				case term = <-inFn:
				case <-time.After(10 * time.Second):
					t.Fatal("fn not called within 10s")
				}
				if term == nil || term.Token() == 0 {
					t.Fatalf("TermFrom(fn's ctx) = %v, want the term", term)
				}
				if _, err := c.Multi(ctxT(t), term.Guard(), &zk.CreateOp{Path: "/cause/guarded", Mode: zk.ModeEphemeral}); err != nil {
					t.Fatalf("a write guarded by the live term: %v", err)
				}
				tc.end(t, tg, c, other, e, term)
				var s seen
				select {
				case s = <-got:
				case <-time.After(10 * time.Second):
					t.Fatal("fn's ctx not cancelled within 10s")
				}
				if !errors.Is(s.cause, tc.want) {
					t.Errorf("context.Cause(fn's ctx) = %v, want %v", s.cause, tc.want)
				}
				if err := term.Err(); !errors.Is(err, tc.want) {
					t.Errorf("Term.Err = %v, want %v", err, tc.want)
				}
				select {
				case err := <-ran:
					if !errors.Is(err, tc.want) {
						t.Errorf("Run = %v, want %v (fn returned nil, the term was lost)", err, tc.want)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Run did not return within 10s")
				}
				if tc.then != nil {
					tc.then(t, tg, c)
				}
				if tc.want != election.ErrClosed && tc.want != election.ErrSessionLost {
					// The term is over: once its node is gone, the guard
					// refuses a write.
					testkit.AwaitNoNode(t, other, term.Node())
					if _, err := c.Multi(ctxT(t), term.Guard(), &zk.CreateOp{Path: "/cause/late", Mode: zk.ModeEphemeral}); !errors.Is(err, zk.ErrNoNode) {
						t.Errorf("a write guarded by the ended term = %v, want ErrNoNode", err)
					}
				}
			})
		})
	}
}

// Resign ends a Campaign's term with ErrResigned; Run's function that
// returns by itself makes Run return its own result (nil), not a cause.
func TestResignCause(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		e := newElection(t, tg.Connect(t), "/cause/resign", "a")
		term, err := e.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		<-term.Lost()
		if err := term.Err(); !errors.Is(err, election.ErrResigned) {
			t.Fatalf("Term.Err after Resign = %v, want ErrResigned", err)
		}
		if err := e.Run(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Run whose fn returned nil by itself = %v, want nil", err)
		}
		if election.TermFrom(ctx) != nil {
			t.Fatal("TermFrom of a ctx Run did not make is not nil")
		}
	})
}

// A function that returns an error of its own after its term was lost
// makes Run return that error; its ctx's cause still says why.
func TestRunReturnsFnsOwnError(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c, other := tg.Connect(t), tg.Connect(t)
		e := newElection(t, c, "/cause/own", "a")
		mine := errors.New("fn's own error")
		leading := make(chan *election.Term, 1)
		cause := make(chan error, 1)
		ran := make(chan error, 1)
		go func() {
			ran <- e.Run(ctxT(t), func(ctx context.Context) error {
				leading <- election.TermFrom(ctx)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return mine
			})
		}()
		term := <-leading
		if err := other.Delete(ctxT(t), term.Node(), zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if err := <-cause; !errors.Is(err, election.ErrNodeDeleted) {
			t.Errorf("context.Cause = %v, want ErrNodeDeleted", err)
		}
		if err := <-ran; !errors.Is(err, mine) || errors.Is(err, election.ErrNodeDeleted) {
			t.Errorf("Run = %v, want fn's own error", err)
		}
	})
}

// With WithSuspendedIsLost(false), a connection loss that ends with the
// same session does not end the term: Lost stays open, Run's function
// goes on, and the watch on our node still works after the reconnect (a
// deletion then ends the term with ErrNodeDeleted).
func TestTermSurvivesSuspensionWhenAllowed(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c, other := tg.Connect(t), tg.Connect(t)
		e := newElection(t, c, "/cause/keep", "a", election.WithSuspendedIsLost(false))
		sub := e.Subscribe()
		defer sub.Close()
		leading := make(chan *election.Term, 1)
		cause := make(chan error, 1)
		ran := make(chan error, 1)
		go func() {
			ran <- e.Run(ctxT(t), func(ctx context.Context) error {
				leading <- election.TermFrom(ctx)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return nil
			})
		}()
		term := <-leading
		tg.Disconnect(t, c)
		tg.Reconnect(t, c)
		// The election has seen the suspension once it reports the
		// reconnect: its inputs are handled in order.
		awaitEvent(t, sub, events.Reconnected)
		select {
		case <-term.Lost():
			t.Fatalf("Lost closed by a suspension the policy allows (Err %v)", term.Err())
		case err := <-cause:
			t.Fatalf("Run's ctx cancelled by a suspension the policy allows (cause %v)", err)
		default:
		}
		if err := term.Err(); err != nil {
			t.Fatalf("Term.Err = %v, want nil", err)
		}
		if err := other.Delete(ctxT(t), term.Node(), zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-cause:
			if !errors.Is(err, election.ErrNodeDeleted) {
				t.Errorf("context.Cause = %v, want ErrNodeDeleted", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("our node's deletion after a reconnect did not end the term within 10s")
		}
		if err := <-ran; !errors.Is(err, election.ErrNodeDeleted) {
			t.Errorf("Run = %v, want ErrNodeDeleted", err)
		}
	})
}

// awaitEvent waits for an event of type typ on sub.
func awaitEvent(t *testing.T, sub *events.Subscription, typ events.Type) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription closed before %s", typ)
			}
			if ev.Type == typ {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event within 10s", typ)
		}
	}
}

// A waiter whose node another client deletes fails at once with
// ErrNodeDeleted (the watch of its own-node read tells), not when the
// leader before it goes.
func TestWaiterWhoseNodeIsDeletedFails(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		other := tg.Connect(t)
		leader := newElection(t, tg.Connect(t), "/cause/waiter", "a")
		if _, err := leader.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		w := newElection(t, tg.Connect(t), "/cause/waiter", "b")
		sub := w.Subscribe()
		defer sub.Close()
		campaigned := make(chan error, 1)
		go func() {
			_, err := w.Campaign(ctx)
			campaigned <- err
		}()
		node := ""
		for node == "" {
			select {
			case ev := <-sub.C:
				if ev.Type == events.ReadyStart {
					node = ev.Node
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter did not reach READY within 10s")
			}
		}
		if err := other.Delete(ctx, node, zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-campaigned:
			if !errors.Is(err, election.ErrNodeDeleted) {
				t.Fatalf("Campaign = %v, want ErrNodeDeleted", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Campaign did not fail within 10s of its node's deletion")
		}
	})
}

// Run returns nil when its ctx ends, campaigning or leading, whatever fn
// returned on its ctx (nil, context.Canceled, context.DeadlineExceeded),
// with or without requeue; an error of fn's own is returned as it is.
func TestRunReturnsNilWhenItsCtxEnds(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/cause/ctx"
		e := newElection(t, tg.Connect(t), path, "a")
		requeue := newElection(t, tg.Connect(t), path, "r", election.WithRequeue(true))
		mine := errors.New("fn's own error")
		for _, tc := range []struct {
			name     string
			e        *election.Election
			deadline bool                            // ctx ends by its deadline, not cancel
			ret      func(ctx context.Context) error // what fn returns once its ctx ends
			want     error
		}{
			{"nil", e, false, func(context.Context) error { return nil }, nil},
			{"canceled", e, false, func(ctx context.Context) error { return ctx.Err() }, nil},
			{"deadline", e, true, func(ctx context.Context) error { return ctx.Err() }, nil},
			{"requeue", requeue, false, func(ctx context.Context) error { return ctx.Err() }, nil},
			{"own error", e, false, func(context.Context) error { return mine }, mine},
		} {
			rctx, cancel := context.WithCancel(ctx)
			if tc.deadline {
				rctx, cancel = context.WithTimeout(ctx, time.Second)
			}
			leading := make(chan struct{})
			ran := make(chan error, 1)
			go func() {
				ran <- tc.e.Run(rctx, func(ctx context.Context) error {
					close(leading)
					<-ctx.Done()
					return tc.ret(ctx)
				})
			}()
			if !tc.deadline { // a deadline may end it campaigning too: nil as well
				within(t, leading, "fn called")
				cancel()
			}
			if err := within(t, ran, "Run's return"); !errors.Is(err, tc.want) {
				t.Errorf("%s: Run after its ctx ended while leading = %v, want %v", tc.name, err, tc.want)
			}
			cancel()
		}
		// Campaigning: x leads, and Run waits behind it until its ctx ends.
		x := newElection(t, tg.Connect(t), path, "x")
		if _, err := x.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		for _, w := range []*election.Election{e, requeue} {
			sub := w.Subscribe()
			rctx, cancel := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() {
				ran <- w.Run(rctx, func(context.Context) error { t.Error("fn called while x leads"); return nil })
			}()
			testkit.WaitEvent(t, sub, events.ReadyStart)
			sub.Close()
			cancel()
			if err := within(t, ran, "Run's return"); err != nil {
				t.Errorf("%s: Run after its ctx ended while campaigning = %v, want nil", w.ID(), err)
			}
		}
	})
}
