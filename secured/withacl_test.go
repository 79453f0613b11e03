package secured_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
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

// recorder is a Conn that records the ACL every node is created with
// through it (Create, CreateACL and a Multi's CreateOps).
type recorder struct {
	zk.Conn
	mu   sync.Mutex
	made []made
}

type made struct {
	path string
	acl  []zk.ACL
}

func (r *recorder) note(path string, acl []zk.ACL) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.made = append(r.made, made{path, acl})
}

func (r *recorder) creates() []made {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.made)
}

func (r *recorder) Create(ctx context.Context, path string, data []byte, mode zk.CreateMode) (string, error) {
	return r.CreateACL(ctx, path, data, mode, nil)
}

func (r *recorder) CreateACL(ctx context.Context, path string, data []byte, mode zk.CreateMode, acl []zk.ACL) (string, error) {
	r.note(path, acl)
	return r.Conn.CreateACL(ctx, path, data, mode, acl)
}

func (r *recorder) Multi(ctx context.Context, ops ...zk.Op) ([]zk.OpResult, error) {
	for _, op := range ops {
		if c, ok := op.(*zk.CreateOp); ok {
			r.note(c.Path, c.ACL)
		}
	}
	return r.Conn.Multi(ctx, ops...)
}

// Unwrap lets the simulator's faults find its conn under the recorder.
func (r *recorder) Unwrap() zk.Conn { return r.Conn }

// custom is the ACL the handles are given: anyone may do anything (so the
// recipe works on a server that checks ACLs), and carol may read, which no
// connection's default says.
var custom = []zk.ACL{
	{Perms: zk.PermAll, Scheme: "world", ID: "anyone"},
	{Perms: zk.PermRead, Scheme: "digest", ID: zk.DigestID("carol", "pw")},
}

type handler struct{}

func (handler) Prepare(context.Context, twophase.Tx) (bool, error) { return true, nil }
func (handler) Commit(context.Context, twophase.Tx) error          { return nil }
func (handler) Abort(context.Context, twophase.Tx, string) error   { return nil }

// A recipe, used so that it makes every kind of node it has, under dir
// (which does not exist: its parents are made too), with acl given to
// every handle's WithACL.
type recipe struct {
	name string
	use  func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error
	// open makes one handle with WithACL(acl...), and closes it.
	open func(conn zk.Conn, acl ...zk.ACL) error
}

func closing[H interface{ Close() error }](h H, err error) error {
	if err != nil {
		return err
	}
	return h.Close()
}

var recipes = []recipe{
	{"lock", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		a, b := mustLock(t, conn, dir, lock.WithACL(acl...)), mustLock(t, conn, dir, lock.WithACL(acl...))
		if _, err := a.Acquire(ctx); err != nil {
			return err
		}
		got := make(chan error, 1)
		go func() { _, err := b.Acquire(ctx); got <- err }()
		waitContenders(ctx, t, conn, dir, 2)
		if err := a.Release(ctx); err != nil { // a waiter: the release makes its mark
			return err
		}
		if err := <-got; err != nil {
			return err
		}
		return b.Release(ctx)
	}, func(conn zk.Conn, acl ...zk.ACL) error { return closing(lock.New(conn, "/l", lock.WithACL(acl...))) }},
	{"lock.Multi", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		m, err := lock.NewMulti(conn, []string{dir + "/a", dir + "/b"}, lock.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { m.Close() })
		if _, err := m.Acquire(ctx); err != nil {
			return err
		}
		return m.Release(ctx)
	}, func(conn zk.Conn, acl ...zk.ACL) error {
		return closing(lock.NewMulti(conn, []string{"/a", "/b"}, lock.WithACL(acl...)))
	}},
	{"rwlock", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		rw, err := rwlock.New(conn, dir, rwlock.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { rw.Close() })
		for _, l := range []*rwlock.Lock{rw.ReadLock(), rw.WriteLock()} {
			if _, err := l.Acquire(ctx); err != nil {
				return err
			}
			if err := l.Release(ctx); err != nil {
				return err
			}
		}
		return nil
	}, func(conn zk.Conn, acl ...zk.ACL) error {
		return closing(rwlock.New(conn, "/rw", rwlock.WithACL(acl...)))
	}},
	{"semaphore", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		s, err := semaphore.New(conn, dir, 2, semaphore.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { s.Close() })
		l, err := s.Acquire(ctx)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}, func(conn zk.Conn, acl ...zk.ACL) error {
		return closing(semaphore.New(conn, "/s", 2, semaphore.WithACL(acl...)))
	}},
	{"election", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		e, err := election.New(conn, dir, election.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { e.Close() })
		if _, err := e.Campaign(ctx); err != nil {
			return err
		}
		return e.Resign(ctx)
	}, func(conn zk.Conn, acl ...zk.ACL) error {
		return closing(election.New(conn, "/e", election.WithACL(acl...)))
	}},
	{"queue", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		q, err := queue.New(conn, dir, queue.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { q.Close() })
		if err := q.OfferBatch(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil {
			return err
		}
		for range 2 { // the first Ack claims the next item ahead
			it, err := q.TakeItem(ctx)
			if err != nil {
				return err
			}
			if err := it.Ack(ctx); err != nil {
				return err
			}
		}
		return nil
	}, func(conn zk.Conn, acl ...zk.ACL) error { return closing(queue.New(conn, "/q", queue.WithACL(acl...))) }},
	{"barrier", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		b, err := barrier.New(conn, dir+"/b", barrier.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { b.Close() })
		if err := b.Set(ctx); err != nil {
			return err
		}
		return b.Remove(ctx)
	}, func(conn zk.Conn, acl ...zk.ACL) error {
		return closing(barrier.New(conn, "/b", barrier.WithACL(acl...)))
	}},
	{"barrier.DoubleBarrier", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		d, err := barrier.NewDouble(conn, dir+"/d", 1, barrier.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { d.Close() })
		if err := d.Enter(ctx); err != nil {
			return err
		}
		return d.Leave(ctx)
	}, func(conn zk.Conn, acl ...zk.ACL) error {
		return closing(barrier.NewDouble(conn, "/d", 2, barrier.WithACL(acl...)))
	}},
	{"twophase", func(ctx context.Context, t *testing.T, conn zk.Conn, dir string, acl ...zk.ACL) error {
		p, err := twophase.NewParticipant(conn, dir, "p1", handler{}, twophase.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { p.Close() })
		sctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- p.Serve(sctx) }()
		defer func() { stop(); <-served }()
		if err := twophase.WaitRegistered(ctx, conn, dir, "p1"); err != nil {
			return err
		}
		c, err := twophase.NewCoordinator(conn, dir, twophase.WithACL(acl...))
		if err != nil {
			return err
		}
		t.Cleanup(func() { c.Close() })
		out, err := c.Propose(ctx, "tx1", []byte("x"), []string{"p1"})
		if err == nil && !out.Committed {
			err = fmt.Errorf("tx1 aborted: %s", out.Reason)
		}
		return err
	}, func(conn zk.Conn, acl ...zk.ACL) error {
		if err := closing(twophase.NewCoordinator(conn, "/2pc", twophase.WithACL(acl...))); err != nil {
			return err
		}
		return closing(twophase.NewParticipant(conn, "/2pc", "p1", handler{}, twophase.WithACL(acl...)))
	}},
}

func mustLock(t *testing.T, conn zk.Conn, dir string, opts ...lock.Option) *lock.Lock {
	t.Helper()
	l, err := lock.New(conn, dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// waitContenders waits until dir has n children.
func waitContenders(ctx context.Context, t *testing.T, conn zk.Conn, dir string, n int) {
	t.Helper()
	for {
		kids, _, w, err := conn.ChildrenW(ctx, dir)
		if err == nil && len(kids) >= n {
			return
		}
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		if w == nil {
			var made bool
			_, made, w, err = conn.ExistsW(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			if made { // made since the listing: its watch is not for children
				continue
			}
		}
		select {
		case <-w:
		case <-ctx.Done():
			t.Fatalf("%s: %d contenders never came: %v", dir, n, ctx.Err())
		}
	}
}

// newSim is a simulator closed at the end of the test.
func newSim(t *testing.T) *testkit.Sim {
	sim := testkit.NewSim()
	t.Cleanup(sim.Close)
	return sim
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestWithACL: every node a handle made WithACL creates — its own nodes,
// marks, items, claims, 2PC nodes, and the recipe's path and the missing
// parents above it — is created with that ACL, not the connection's.
func TestWithACL(t *testing.T) {
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			ctx := testCtx(t)
			rec := &recorder{Conn: newSim(t).Connect()}
			t.Cleanup(func() { rec.Close() })
			dir := "/secured/" + r.name
			if err := r.use(ctx, t, rec, dir, custom...); err != nil {
				t.Fatal(err)
			}
			made := rec.creates()
			var wrong []string
			parent := false
			for _, m := range made {
				if !slices.Equal(m.acl, custom) {
					wrong = append(wrong, fmt.Sprintf("%s %v", m.path, m.acl))
				}
				parent = parent || m.path == "/secured"
			}
			if len(wrong) > 0 {
				t.Errorf("%d of %d nodes made with another ACL than WithACL's:\n%s", len(wrong), len(made), strings.Join(wrong, "\n"))
			}
			if !parent {
				t.Errorf("the missing parent /secured was not created through the handle's ACL; creates: %v", made)
			}
			if len(made) < 3 {
				t.Errorf("only %d creates: %v", len(made), made)
			}
		})
	}
}

// TestWithACLRefused: an ACL entry with no permissions, or no scheme, is
// refused by the constructor with its package's ErrInvalidOption (which
// matches zkrecipes.ErrInvalidOption and zk.ErrBadArguments), and nothing
// is created.
func TestWithACLRefused(t *testing.T) {
	for _, bad := range [][]zk.ACL{
		{{Scheme: "world", ID: "anyone"}},
		{{Perms: zk.PermAll, ID: "anyone"}},
		{custom[0], {Perms: 1 << 7, Scheme: "world", ID: "anyone"}},
	} {
		for _, r := range recipes {
			t.Run(fmt.Sprintf("%s/%v", r.name, bad), func(t *testing.T) {
				rec := &recorder{Conn: newSim(t).Connect()}
				t.Cleanup(func() { rec.Close() })
				err := r.open(rec, bad...)
				if !errors.Is(err, zkrecipes.ErrInvalidOption) || !errors.Is(err, zk.ErrBadArguments) {
					t.Fatalf("got %v, want an error matching zkrecipes.ErrInvalidOption and zk.ErrBadArguments", err)
				}
				if !strings.HasPrefix(err.Error(), strings.Split(r.name, ".")[0]+": ") {
					t.Errorf("%q does not name its package", err)
				}
				if made := rec.creates(); len(made) > 0 {
					t.Errorf("created %v", made)
				}
			})
		}
	}
}
