package secured_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

var (
	alicePW = zk.WithAuth("digest", []byte("alice:pw"))
	bobPW   = zk.WithAuth("digest", []byte("bob:pw"))
)

// open fails the test if a constructor failed, and closes its handle h at
// the end of the test.
func open[H interface{ Close() error }](t *testing.T, h H, err error) H {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// A refusal: alice, with the default ACL of an authenticated connection
// (CreatorAll, world read), made dir (and, in setup, what the recipe
// needs there); bob's call, which must write there, is refused.
type refusal struct {
	name  string
	setup func(ctx context.Context, t *testing.T, alice zk.Conn, dir string)
	// call makes bob's handle and returns the refused call's error, after
	// which the tree must be as it was before the call (or at call's last
	// snap()), and the handle's Close.
	call func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, snap func()) (func() error, error)
}

var refusals = []refusal{
	{"lock.Acquire", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		l, err := lock.New(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Acquire(ctx)
		return l.Close, err
	}},
	{"lock.TryAcquire", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		l, err := lock.New(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = l.TryAcquire(ctx)
		return l.Close, err
	}},
	// The first lock's directory is anyone's: bob takes it, then is
	// refused the second, and gives the first back.
	{"lock.Multi.Acquire", func(ctx context.Context, t *testing.T, alice zk.Conn, dir string) {
		if _, err := alice.CreateACL(ctx, dir+"/a", nil, zk.ModePersistent, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		m, err := lock.NewMulti(bob, []string{dir + "/a", dir + "/b"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Acquire(ctx)
		return m.Close, err
	}},
	{"rwlock.ReadLock.Acquire", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		rw, err := rwlock.New(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rw.ReadLock().Acquire(ctx)
		return rw.Close, err
	}},
	{"rwlock.WriteLock.Acquire", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		rw, err := rwlock.New(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rw.WriteLock().Acquire(ctx)
		return rw.Close, err
	}},
	{"semaphore.Acquire", func(ctx context.Context, t *testing.T, alice zk.Conn, dir string) {
		s, err := semaphore.New(alice, dir+"/s", 2) // records maxLeases at dir/s
		open(t, s, err)
		l, err := s.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		s, err := semaphore.New(bob, dir+"/s", 2)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Acquire(ctx)
		return s.Close, err
	}},
	{"election.Campaign", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		e, err := election.New(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Campaign(ctx)
		return e.Close, err
	}},
	{"election.Run", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		e, err := election.New(bob, dir, election.WithRequeue(true))
		if err != nil {
			t.Fatal(err)
		}
		return e.Close, e.Run(ctx, func(context.Context) error { return errors.New("bob led") })
	}},
	{"queue.Offer", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		q, err := queue.New(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		return q.Close, q.Offer(ctx, []byte("x"))
	}},
	{"queue.Take", offerAsAlice, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		q, err := queue.New(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.Take(ctx)
		return q.Close, err
	}},
	{"queue.TakeItem", offerAsAlice, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		q, err := queue.New(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.TakeItem(ctx)
		return q.Close, err
	}},
	// Anyone may add items to alice's queue, and claim them; only alice
	// may remove them. Bob's item, taken by bob, cannot be acked by him.
	{"queue.Ack", anyoneAdds, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, snap func()) (func() error, error) {
		q, err := queue.New(bob, dir, queue.WithACL(zk.WorldACL(zk.PermAll)...))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Offer(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snap() // the item and our claim, which stays: Nack gives it back
		err = it.Ack(ctx)
		return func() error {
			if err := it.Nack(ctx); err != nil {
				return err
			}
			return q.Close()
		}, err
	}},
	// Consume stops at the first refused ack, and gives the item back.
	{"queue.Consume", anyoneAdds, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, snap func()) (func() error, error) {
		q, err := queue.New(bob, dir, queue.WithACL(zk.WorldACL(zk.PermAll)...))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Offer(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
		snap()
		return q.Close, q.Consume(ctx, func(context.Context, []byte) error { return nil })
	}},
	{"barrier.Set", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		b, err := barrier.New(bob, dir+"/b")
		if err != nil {
			t.Fatal(err)
		}
		return b.Close, b.Set(ctx)
	}},
	{"barrier.Remove", func(ctx context.Context, t *testing.T, alice zk.Conn, dir string) {
		b, err := barrier.New(alice, dir+"/b")
		if err := open(t, b, err).Set(ctx); err != nil {
			t.Fatal(err)
		}
	}, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		b, err := barrier.New(bob, dir+"/b")
		if err != nil {
			t.Fatal(err)
		}
		return b.Close, b.Remove(ctx)
	}},
	{"barrier.DoubleBarrier.Enter", func(ctx context.Context, t *testing.T, alice zk.Conn, dir string) {
		if _, err := alice.Create(ctx, dir+"/d", []byte(strconv.Itoa(2)), zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
	}, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		d, err := barrier.NewDouble(bob, dir+"/d", 2)
		if err != nil {
			t.Fatal(err)
		}
		return d.Close, d.Enter(ctx)
	}},
	{"twophase.Participant.Serve", nil, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		p, err := twophase.NewParticipant(bob, dir, "p1", handler{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Close, p.Serve(ctx)
	}},
	{"twophase.Coordinator.Propose", func(ctx context.Context, t *testing.T, alice zk.Conn, dir string) {
		p, err := twophase.NewParticipant(alice, dir, "p1", handler{})
		open(t, p, err)
		sctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- p.Serve(sctx) }()
		t.Cleanup(func() { stop(); <-served })
		if err := twophase.WaitRegistered(ctx, alice, dir, "p1"); err != nil {
			t.Fatal(err)
		}
	}, func(ctx context.Context, t *testing.T, bob zk.Conn, dir string, _ func()) (func() error, error) {
		c, err := twophase.NewCoordinator(bob, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Propose(ctx, "tx1", []byte("x"), []string{"p1"})
		return c.Close, err
	}},
}

// anyoneAdds makes dir a queue anyone may add items to and claim them,
// but only alice may remove them.
func anyoneAdds(ctx context.Context, t *testing.T, alice zk.Conn, dir string) {
	if err := alice.Delete(ctx, dir, zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	acl := append(zk.WorldACL(zk.PermRead|zk.PermCreate|zk.PermWrite), zk.CreatorAll()...)
	if _, err := alice.CreateACL(ctx, dir, nil, zk.ModePersistent, acl); err != nil {
		t.Fatal(err)
	}
}

func offerAsAlice(ctx context.Context, t *testing.T, alice zk.Conn, dir string) {
	q, err := queue.New(alice, dir)
	if err := open(t, q, err).Offer(ctx, []byte("alice's")); err != nil {
		t.Fatal(err)
	}
}

// TestNoAuth: a call that must write where the ACL lets only another
// identity returns an error matching zk.ErrNoAuth, from the recipe's
// public call, as soon as the server refuses (not when ctx ends); the
// handle then closes cleanly and nothing it made is left in the tree.
func TestNoAuth(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg testkit.Target) {
		alice, bob := tg.Connect(t, alicePW), tg.Connect(t, bobPW)
		for _, r := range refusals {
			t.Run(r.name, func(t *testing.T) {
				ctx := testCtx(t)
				dir := "/noauth/" + r.name
				if err := zk.EnsurePath(ctx, alice, dir, zk.ModePersistent); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { removeTree(t, alice, dir) })
				if r.setup != nil {
					r.setup(ctx, t, alice, dir)
				}
				var before []string
				snap := func() { before = tree(ctx, t, alice, dir) }
				snap()
				start := time.Now()
				closeHandle, err := r.call(ctx, t, bob, dir, snap)
				if !errors.Is(err, zk.ErrNoAuth) {
					t.Fatalf("got %v after %v, want an error matching zk.ErrNoAuth", err, time.Since(start).Round(time.Millisecond))
				}
				if after := tree(ctx, t, alice, dir); !slices.Equal(before, after) {
					t.Errorf("the refused call left the tree changed:\nbefore %v\nafter  %v", before, after)
				}
				if err := closeHandle(); err != nil {
					t.Errorf("Close after the refusal: %v", err)
				}
			})
		}
	})
}

// tree lists every node under dir, as c sees it, in order.
func tree(ctx context.Context, t *testing.T, c zk.Conn, dir string) []string {
	t.Helper()
	var out []string
	var walk func(p string)
	walk = func(p string) {
		kids, _, err := c.Children(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatalf("listing %s: %v", p, err)
		}
		slices.Sort(kids)
		for _, k := range kids {
			out = append(out, zk.Join(p, k))
			walk(zk.Join(p, k))
		}
	}
	walk(dir)
	return out
}

// removeTree deletes dir and what is under it, as c (its owner).
func removeTree(t *testing.T, c zk.Conn, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var del func(p string) error
	del = func(p string) error {
		kids, _, err := c.Children(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := del(zk.Join(p, k)); err != nil {
				return err
			}
		}
		if err := c.Delete(ctx, p, zk.AnyVersion); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	}
	if err := del(dir); err != nil {
		t.Errorf("removing %s: %v", dir, err)
	}
}
