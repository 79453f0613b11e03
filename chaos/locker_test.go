package chaos

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// locker is what the lock workers use: the real lock, or brokenLock.
type locker interface {
	Acquire(ctx context.Context) (grant, error)
	Release(ctx context.Context) error
	Close() error
	// Holds are the holds the handle reported, up to stopped.
	Holds(resource, who string, stopped time.Time) ([]hold, []string)
}

// grant is what a worker needs of a hold.
type grant interface {
	Token() int64
	Guard() *zk.CheckOp
	Lost() <-chan struct{}
}

func isNotHeld(err error) bool {
	return errors.Is(err, lock.ErrNotHeld) || errors.Is(err, errBrokenNotHeld)
}

// realLock is machines/lock with its lifecycle events recorded.
type realLock struct {
	*lock.Lock
	rec *testkit.Recorder
}

func newRealLock(t *testing.T, c zk.Conn, path, who string) *realLock {
	l, err := lock.New(c, path, lock.WithID(who))
	if err != nil {
		t.Fatal(err)
	}
	return &realLock{Lock: l, rec: testkit.Record(t, l)}
}

func (l *realLock) Acquire(ctx context.Context) (grant, error) {
	g, err := l.Lock.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (l *realLock) Holds(resource, who string, stopped time.Time) ([]hold, []string) {
	return holdsFromEvents(resource, who, exclusive, l.rec.Events(), stopped)
}

// brokenLock is a lock that is wrong on purpose: it creates its node
// like the real one and then holds at once, without waiting for the nodes
// below it. Its holds run from Acquire's return to Release's call. The
// suite must report it.
type brokenLock struct {
	conn zk.Conn
	dir  string

	mu    sync.Mutex
	cur   *brokenGrant
	holds []hold
}

var errBrokenNotHeld = errors.New("broken lock: not held")

type brokenGrant struct {
	node  string
	token int64
	start time.Time
	lost  chan struct{}
}

func (g *brokenGrant) Token() int64          { return g.token }
func (g *brokenGrant) Guard() *zk.CheckOp    { return &zk.CheckOp{Path: g.node, Version: zk.AnyVersion} }
func (g *brokenGrant) Lost() <-chan struct{} { return g.lost }

func newBrokenLock(c zk.Conn, dir string) *brokenLock { return &brokenLock{conn: c, dir: dir} }

func (l *brokenLock) Acquire(ctx context.Context) (grant, error) {
	if err := ensureContainers(ctx, l.conn, l.dir); err != nil {
		return nil, err
	}
	node, err := l.conn.Create(ctx, l.dir+"/_c_"+uuid.NewString()+"-lock-", nil, zk.ModeEphemeralSequential)
	if err != nil {
		return nil, err
	}
	st, ok, err := l.conn.Exists(ctx, node)
	if err != nil || !ok {
		l.conn.Delete(context.WithoutCancel(ctx), node, zk.AnyVersion)
		return nil, errors.Join(err, errBrokenNotHeld)
	}
	g := &brokenGrant{node: node, token: st.Czxid, start: time.Now(), lost: make(chan struct{})}
	l.mu.Lock()
	l.cur = g
	l.mu.Unlock()
	return g, nil
}

func (l *brokenLock) Release(ctx context.Context) error {
	l.mu.Lock()
	g := l.cur
	l.cur = nil
	if g != nil {
		l.holds = append(l.holds, hold{kind: exclusive, token: g.token, start: g.start, end: time.Now()})
	}
	l.mu.Unlock()
	if g == nil {
		return errBrokenNotHeld
	}
	err := l.conn.Delete(ctx, g.node, zk.AnyVersion)
	if errors.Is(err, zk.ErrNoNode) {
		err = nil
	}
	return err
}

func (l *brokenLock) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil && !errors.Is(err, errBrokenNotHeld) {
		return err
	}
	return nil
}

func (l *brokenLock) Holds(resource, who string, _ time.Time) ([]hold, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]hold, len(l.holds))
	for i, h := range l.holds {
		h.resource, h.who = resource, who
		out[i] = h
	}
	return out, nil
}

// ensureContainers creates path and its missing parents as containers.
func ensureContainers(ctx context.Context, c zk.Conn, path string) error {
	if _, ok, err := c.Exists(ctx, path); err != nil || ok {
		return err
	}
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		if _, err := c.Create(ctx, p, nil, zk.ModeContainer); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}
