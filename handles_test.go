package zkrecipes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// handle is the face every recipe's handle has.
type handle interface {
	Path() string
	ID() string
	State() events.State
	Subscribe(...events.SubscribeOption) *events.Subscription
	Close() error
}

// A kind of handle: open makes one on path with id, and returns it with
// its other methods, each called once after Close.
type kind struct {
	name     string
	errClose error // the package's ErrClosed
	// path is what Path says of a handle opened on p (nil: p itself).
	path func(p string) string
	open func(t *testing.T, conn zk.Conn, path, id string) (handle, map[string]func(context.Context) error)
}

type handler struct{}

func (handler) Prepare(context.Context, twophase.Tx) (bool, error) { return true, nil }
func (handler) Commit(context.Context, twophase.Tx) error          { return nil }
func (handler) Abort(context.Context, twophase.Tx, string) error   { return nil }

var kinds = []kind{
	{"lock.Lock", lock.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		l, err := lock.New(c, path, lock.WithID(id))
		check(t, err)
		return l, map[string]func(context.Context) error{
			"Acquire":    func(ctx context.Context) error { _, err := l.Acquire(ctx); return err },
			"TryAcquire": func(ctx context.Context) error { _, _, err := l.TryAcquire(ctx); return err },
			"Release":    l.Release,
		}
	}},
	{"lock.Multi", lock.ErrClosed, func(p string) string { return p + "/a," + p + "/b" }, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		m, err := lock.NewMulti(c, []string{path + "/a", path + "/b"}, lock.WithID(id))
		check(t, err)
		return m, map[string]func(context.Context) error{
			"Acquire": func(ctx context.Context) error { _, err := m.Acquire(ctx); return err },
			"Release": m.Release,
		}
	}},
	{"rwlock.RWLock", rwlock.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		rw, err := rwlock.New(c, path, rwlock.WithID(id))
		check(t, err)
		return rw, map[string]func(context.Context) error{
			"ReadLock.Acquire":  func(ctx context.Context) error { _, err := rw.ReadLock().Acquire(ctx); return err },
			"WriteLock.Acquire": func(ctx context.Context) error { _, err := rw.WriteLock().Acquire(ctx); return err },
			"WriteLock.Release": rw.WriteLock().Release,
		}
	}},
	{"semaphore.Semaphore", semaphore.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		s, err := semaphore.New(c, path, 2, semaphore.WithID(id))
		check(t, err)
		return s, map[string]func(context.Context) error{
			"Acquire":    func(ctx context.Context) error { _, err := s.Acquire(ctx); return err },
			"AcquireN":   func(ctx context.Context) error { _, err := s.AcquireN(ctx, 2); return err },
			"TryAcquire": func(ctx context.Context) error { _, _, err := s.TryAcquire(ctx); return err },
		}
	}},
	{"election.Election", election.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		e, err := election.New(c, path, election.WithID(id))
		check(t, err)
		return e, map[string]func(context.Context) error{
			"Campaign":     func(ctx context.Context) error { _, err := e.Campaign(ctx); return err },
			"Resign":       e.Resign,
			"Leader":       func(ctx context.Context) error { _, err := e.Leader(ctx); return err },
			"Participants": func(ctx context.Context) error { _, err := e.Participants(ctx); return err },
			"Run":          func(ctx context.Context) error { return e.Run(ctx, func(context.Context) error { return nil }) },
		}
	}},
	{"queue.Queue", queue.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		q, err := queue.New(c, path, queue.WithID(id))
		check(t, err)
		return q, map[string]func(context.Context) error{
			"Offer":    func(ctx context.Context) error { return q.Offer(ctx, []byte("x")) },
			"Peek":     func(ctx context.Context) error { _, err := q.Peek(ctx); return err },
			"Poll":     func(ctx context.Context) error { _, err := q.Poll(ctx); return err },
			"Take":     func(ctx context.Context) error { _, err := q.Take(ctx); return err },
			"TakeItem": func(ctx context.Context) error { _, err := q.TakeItem(ctx); return err },
			"Len":      func(ctx context.Context) error { _, err := q.Len(ctx); return err },
			"Consume": func(ctx context.Context) error {
				return q.Consume(ctx, func(context.Context, []byte) error { return nil })
			},
		}
	}},
	{"barrier.Barrier", barrier.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		b, err := barrier.New(c, path, barrier.WithID(id))
		check(t, err)
		return b, map[string]func(context.Context) error{"Set": b.Set, "Remove": b.Remove, "Wait": b.Wait}
	}},
	{"barrier.DoubleBarrier", barrier.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		d, err := barrier.NewDouble(c, path, 2, barrier.WithID(id))
		check(t, err)
		return d, map[string]func(context.Context) error{"Enter": d.Enter, "Leave": d.Leave}
	}},
	{"cache.NodeCache", cache.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		nc, err := cache.NewNode(c, path, cache.WithID(id))
		check(t, err)
		return nc, map[string]func(context.Context) error{"Initialized": nc.Initialized}
	}},
	{"cache.ChildrenCache", cache.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		cc, err := cache.NewChildren(c, path, cache.WithID(id))
		check(t, err)
		return cc, map[string]func(context.Context) error{"Initialized": cc.Initialized}
	}},
	{"cache.TreeCache", cache.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		tc, err := cache.NewTree(c, path, cache.WithID(id))
		check(t, err)
		return tc, map[string]func(context.Context) error{"Initialized": tc.Initialized}
	}},
	{"group.Member", group.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := group.Join(ctx, c, path, id, []byte("d"))
		check(t, err)
		return m, map[string]func(context.Context) error{
			"SetData": func(ctx context.Context) error { return m.SetData(ctx, nil) },
			"Leave":   m.Leave,
		}
	}},
	{"group.Group", group.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		g, err := group.Watch(c, path, group.WithID(id))
		check(t, err)
		return g, map[string]func(context.Context) error{"Initialized": g.Initialized}
	}},
	{"discovery.Registration", discovery.ErrClosed, service, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := discovery.Register(ctx, c, path, discovery.Instance{Name: "api", ID: id})
		check(t, err)
		return r, map[string]func(context.Context) error{"Update": func(ctx context.Context) error { return r.Update(ctx, r.Instance()) }}
	}},
	{"discovery.Provider", discovery.ErrClosed, service, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		p, err := discovery.NewProvider(c, path, "api", discovery.WithID(id))
		check(t, err)
		return p, map[string]func(context.Context) error{
			"Initialized": p.Initialized,
			"Instance":    func(ctx context.Context) error { _, err := p.Instance(ctx); return err },
		}
	}},
	{"twophase.Coordinator", twophase.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		co, err := twophase.NewCoordinator(c, path, twophase.WithID(id))
		check(t, err)
		return co, map[string]func(context.Context) error{
			"Propose": func(ctx context.Context) error { _, err := co.Propose(ctx, "tx1", nil, []string{"p"}); return err },
		}
	}},
	{"twophase.Participant", twophase.ErrClosed, nil, func(t *testing.T, c zk.Conn, path, id string) (handle, map[string]func(context.Context) error) {
		p, err := twophase.NewParticipant(c, path, id, handler{})
		check(t, err)
		return p, map[string]func(context.Context) error{"Serve": p.Serve}
	}},
}

// service is a discovery handle's Path: its service "api" under the base.
func service(base string) string { return base + "/api" }

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every handle has one face: Path and ID as given, a State, a
// subscription that starts with START, Close twice with one result, and
// after Close every call failing with an error that is both the
// package's ErrClosed and zkrecipes.ErrClosed.
func TestEveryHandleHasOneShape(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		conn := tg.Connect(t)
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				path, id := "/shape/"+k.name, "id-"+k.name
				h, calls := k.open(t, conn, path, id)
				want := path
				if k.path != nil {
					want = k.path(path)
				}
				if h.Path() != want || h.ID() != id {
					t.Errorf("Path, ID = %q, %q; want %q, %q", h.Path(), h.ID(), want, id)
				}
				if h.State() == "" {
					t.Error("State is empty")
				}
				sub := h.Subscribe()
				select {
				case ev := <-sub.C:
					if ev.Type != events.Start {
						t.Errorf("first event %v, want START", ev.Type)
					}
				case <-time.After(5 * time.Second):
					t.Error("no START within 5 s")
				}
				sub.Close()
				first := h.Close()
				if err := h.Close(); err != first {
					t.Errorf("second Close = %v, first %v", err, first)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				for name, call := range calls {
					if err := call(ctx); !errors.Is(err, k.errClose) || !errors.Is(err, zkrecipes.ErrClosed) {
						t.Errorf("%s after Close = %v, want %v matching zkrecipes.ErrClosed", name, err, k.errClose)
					}
				}
			})
		}
	})
}
