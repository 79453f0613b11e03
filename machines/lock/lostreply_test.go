package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestLostReplyInEachState loses the reply to each kind of request the lock
// makes, in the state that makes it: the request reaches the server and is
// applied, the client sees a connection loss and reconnects with the same
// session. Whatever was lost, no caller is told the node was deleted, the
// lock goes on working for the victim and for another participant, and
// once both are closed no node is left.
func TestLostReplyInEachState(t *testing.T) {
	type scene struct {
		ctx     context.Context
		t       *testing.T
		tg      testkit.Target
		dir     string
		a, b    *lock.Lock // a is the victim, on conn ca
		ca, cb  zk.Conn
		arm     func(op testkit.OpKind, prefix string) *testkit.ReplyFault
		noErrNo func(what string, err error)
	}
	// holdB makes b hold the lock, and returns its node.
	holdB := func(s *scene) string {
		g, err := s.b.Acquire(s.ctx)
		if err != nil {
			s.t.Fatal(err)
		}
		return g.Node()
	}
	// waitA starts a's Acquire and returns once a waits behind b.
	waitA := func(s *scene) <-chan acquired {
		sub := s.a.Subscribe()
		defer sub.Close()
		res := acquireAsync(s.ctx, s.a)
		testkit.WaitEvent(s.t, sub, events.ReadyStart)
		return res
	}
	acquireA := func(s *scene, res <-chan acquired) {
		r := <-res
		s.noErrNo("a's Acquire", r.err)
		if r.err != nil {
			s.t.Fatalf("a's Acquire: %v", r.err)
		}
	}
	for _, tc := range []struct {
		name string
		run  func(s *scene) *testkit.ReplyFault
	}{
		{"OFFER create", func(s *scene) *testkit.ReplyFault {
			f := s.arm(testkit.OpCreate, s.dir+"/_c_")
			acquireA(s, acquireAsync(s.ctx, s.a))
			return f
		}},
		{"DETERMINE own-node read", func(s *scene) *testkit.ReplyFault {
			f := s.arm(testkit.OpChildren, s.dir+"/_c_")
			acquireA(s, acquireAsync(s.ctx, s.a))
			return f
		}},
		{"DETERMINE either read", func(s *scene) *testkit.ReplyFault {
			f := s.arm(testkit.OpChildren, s.dir)
			acquireA(s, acquireAsync(s.ctx, s.a))
			return f
		}},
		{"READY release-mark watch", func(s *scene) *testkit.ReplyFault {
			bNode := holdB(s)
			f := s.arm(testkit.OpExists, bNode+".released")
			res := acquireAsync(s.ctx, s.a)
			<-f.Fired()
			if err := s.b.Release(s.ctx); err != nil {
				s.t.Fatal(err)
			}
			acquireA(s, res)
			return f
		}},
		{"READY predecessor watch", func(s *scene) *testkit.ReplyFault {
			bNode := holdB(s)
			f := s.arm(testkit.OpChildren, bNode)
			res := acquireAsync(s.ctx, s.a)
			<-f.Fired()
			if err := s.b.Release(s.ctx); err != nil {
				s.t.Fatal(err)
			}
			acquireA(s, res)
			return f
		}},
		{"READY recheck of the nodes below", func(s *scene) *testkit.ReplyFault {
			// a waits behind w, which waits behind b. w gives up: its
			// node goes with no release mark, and a asks whether b is
			// still there, and watches it, in one request (a child watch on b).
			bNode := holdB(s)
			w := newLock(s.t, s.tg.Connect(s.t), s.dir)
			wsub := w.Subscribe()
			wctx, wcancel := context.WithCancel(s.ctx)
			defer wcancel()
			wres := acquireAsync(wctx, w)
			testkit.WaitEvent(s.t, wsub, events.ReadyStart)
			wsub.Close()
			res := waitA(s)
			f := s.arm(testkit.OpChildren, bNode)
			wcancel()
			if r := <-wres; !errors.Is(r.err, context.Canceled) {
				s.t.Fatalf("w's Acquire = %v, want context.Canceled", r.err)
			}
			<-f.Fired()
			if err := s.b.Release(s.ctx); err != nil {
				s.t.Fatal(err)
			}
			acquireA(s, res)
			return f
		}},
		{"LEADER release multi", func(s *scene) *testkit.ReplyFault {
			acquireA(s, acquireAsync(s.ctx, s.a))
			f := s.arm(testkit.OpMulti, s.dir+"/_c_")
			err := s.a.Release(s.ctx)
			s.noErrNo("a's Release", err)
			return f
		}},
		{"STOP delete of a waiter", func(s *scene) *testkit.ReplyFault {
			holdB(s)
			res := waitA(s)
			f := s.arm(testkit.OpDelete, s.dir+"/_c_")
			if err := s.a.Close(); err != nil {
				s.t.Fatalf("Close: %v", err)
			}
			if r := <-res; r.err == nil {
				s.t.Fatal("a's Acquire succeeded after Close")
			}
			if err := s.b.Release(s.ctx); err != nil {
				s.t.Fatal(err)
			}
			return f
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
				s := &scene{ctx: ctxT(t), t: t, tg: tg, dir: "/lost/lock"}
				s.ca, s.cb = tg.Connect(t), tg.Connect(t)
				ensureDir(t, s.cb, s.dir)
				s.a, s.b = newLock(t, s.ca, s.dir), newLock(t, s.cb, s.dir)
				s.arm = func(op testkit.OpKind, prefix string) *testkit.ReplyFault {
					return tg.LoseNextReply(t, s.ca, op, prefix)
				}
				s.noErrNo = func(what string, err error) {
					if errors.Is(err, lock.ErrNodeDeleted) {
						t.Fatalf("%s = %v: a lost reply taken for the node's deletion", what, err)
					}
				}
				f := tc.run(s)
				select {
				case <-f.Fired():
				case <-time.After(10 * time.Second):
					t.Fatal("the fault never fired: the test tested nothing")
				}
				// Another participant gets the lock after the victim: the
				// victim's node, whatever became of it, is not in the way.
				if a := s.a.State(); a == "LEADER" {
					if err := s.a.Release(s.ctx); err != nil {
						t.Fatalf("a's Release: %v", err)
					}
				}
				if _, err := s.b.Acquire(s.ctx); err != nil {
					t.Fatalf("b's Acquire after the fault: %v", err)
				}
				if err := s.b.Release(s.ctx); err != nil {
					t.Fatal(err)
				}
				for _, l := range []*lock.Lock{s.a, s.b} {
					if err := l.Close(); err != nil {
						t.Fatalf("Close after the fault: %v", err)
					}
				}
				eventually(t, s.cb, s.dir, "no node left once both are closed", func(kids []string) bool { return len(kids) == 0 })
			})
		})
	}
}
