package testkit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Helpers shared by the simulator's tests and the conformance suite.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err matches want (nil: no error).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// session is a zk.Conn whose helper methods fail the test on an error.
type session struct {
	zk.Conn
	t   *testing.T
	ctx context.Context
}

func newSession(t *testing.T, c zk.Conn) session { return session{c, t, testCtx(t)} }

func (s session) create(path string, data []byte, mode zk.CreateMode) string {
	s.t.Helper()
	p, err := s.Create(s.ctx, path, data, mode)
	if err != nil {
		s.t.Fatalf("create %s (%v): %v", path, mode, err)
	}
	return p
}

func (s session) mkdir(path string) { s.t.Helper(); s.create(path, nil, zk.ModePersistent) }

func (s session) del(path string) {
	s.t.Helper()
	if err := s.Delete(s.ctx, path, zk.AnyVersion); err != nil {
		s.t.Fatalf("delete %s: %v", path, err)
	}
}

func (s session) set(path string, data []byte) zk.Stat {
	s.t.Helper()
	st, err := s.Set(s.ctx, path, data, zk.AnyVersion)
	if err != nil {
		s.t.Fatalf("set %s: %v", path, err)
	}
	return st
}

func (s session) get(path string) ([]byte, zk.Stat) {
	s.t.Helper()
	d, st, err := s.Get(s.ctx, path)
	if err != nil {
		s.t.Fatalf("get %s: %v", path, err)
	}
	return d, st
}

func (s session) stat(path string) zk.Stat { s.t.Helper(); _, st := s.get(path); return st }

func (s session) exists(path string) bool {
	s.t.Helper()
	_, ok, err := s.Exists(s.ctx, path)
	if err != nil {
		s.t.Fatalf("exists %s: %v", path, err)
	}
	return ok
}

func (s session) children(path string) []string {
	s.t.Helper()
	names, _, err := s.Children(s.ctx, path)
	if err != nil {
		s.t.Fatalf("children %s: %v", path, err)
	}
	return names
}

func (s session) getW(path string) <-chan zk.WatchEvent {
	s.t.Helper()
	_, _, ch, err := s.GetW(s.ctx, path)
	if err != nil {
		s.t.Fatalf("getW %s: %v", path, err)
	}
	return ch
}

func (s session) existsW(path string) <-chan zk.WatchEvent {
	s.t.Helper()
	_, _, ch, err := s.ExistsW(s.ctx, path)
	if err != nil {
		s.t.Fatalf("existsW %s: %v", path, err)
	}
	return ch
}

func (s session) childrenW(path string) <-chan zk.WatchEvent {
	s.t.Helper()
	_, _, ch, err := s.ChildrenW(s.ctx, path)
	if err != nil {
		s.t.Fatalf("childrenW %s: %v", path, err)
	}
	return ch
}

// sessionLog records a conn's session events.
type sessionLog struct {
	mu     sync.Mutex
	evs    []zk.SessionEvent
	change chan struct{} // closed and replaced at every event
}

func recordSession(t *testing.T, c zk.Conn) *sessionLog {
	l := &sessionLog{change: make(chan struct{})}
	cancel := c.Subscribe(func(ev zk.SessionEvent) {
		l.mu.Lock()
		l.evs = append(l.evs, ev)
		close(l.change)
		l.change = make(chan struct{})
		l.mu.Unlock()
	})
	t.Cleanup(cancel)
	return l
}

func (l *sessionLog) events() []zk.SessionEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

func (l *sessionLog) states() []zk.SessionState {
	var s []zk.SessionState
	for _, ev := range l.events() {
		s = append(s, ev.State)
	}
	return s
}

// waitFor waits until the log holds an event in state, and returns it.
func (l *sessionLog) waitFor(t *testing.T, state zk.SessionState) zk.SessionEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		for _, ev := range l.evs {
			if ev.State == state {
				l.mu.Unlock()
				return ev
			}
		}
		change := l.change
		l.mu.Unlock()
		select {
		case <-change:
		case <-deadline:
			t.Fatalf("no %v session event; got %v", state, l.states())
		}
	}
}

// delivered returns the event already in ch, failing if there is none.
func delivered(t *testing.T, ch <-chan zk.WatchEvent) zk.WatchEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	default:
		t.Fatal("no watch event delivered")
		return zk.WatchEvent{}
	}
}

// undelivered fails if ch holds an event now.
func undelivered(t *testing.T, ch <-chan zk.WatchEvent) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected watch event %+v", ev)
	default:
	}
}

// await waits for ch's event.
func await(t *testing.T, ch <-chan zk.WatchEvent) zk.WatchEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no watch event within 20 s")
		return zk.WatchEvent{}
	}
}
