package testkit

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

func TestScriptConn(t *testing.T) {
	s := NewScript(t)
	var states []zk.SessionState
	cancelSub := s.Subscribe(func(ev zk.SessionEvent) { states = append(states, ev.State) })
	defer cancelSub()

	type childrenReply struct {
		names []string
		w     <-chan zk.WatchEvent
		err   error
	}
	got := make(chan childrenReply, 1)
	go func() {
		names, _, w, err := s.ChildrenW(context.Background(), "/a")
		got <- childrenReply{names, w, err}
	}()
	c := s.Next(OpChildren, "/a")
	c.Children(zk.Stat{}, "x", "y")
	r := <-got
	if r.err != nil || !slices.Equal(r.names, []string{"x", "y"}) || r.w == nil {
		t.Fatalf("ChildrenW = %v, %v, watch %v", r.names, r.err, r.w != nil)
	}
	c.Fire(zk.EventNodeChildrenChanged)
	if ev := <-r.w; ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/a" {
		t.Fatalf("watch event %+v", ev)
	}

	// A watch left when the session expires ends with NotWatching.
	go func() {
		_, _, w, err := s.ExistsW(context.Background(), "/b")
		got <- childrenReply{w: w, err: err}
	}()
	s.Next(OpExists, "/b").Missing()
	r = <-got
	s.Expire()
	if ev := <-r.w; ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrSessionExpired) {
		t.Fatalf("watch event after expiry %+v", ev)
	}
	if s.SessionID() != 2 || !slices.Equal(states, []zk.SessionState{zk.StateLost, zk.StateConnected}) {
		t.Fatalf("after Expire: session %d, states %v", s.SessionID(), states)
	}

	// A call whose ctx ends before it is taken is withdrawn.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Delete(ctx, "/c", -1) }()
	s.mu.Lock()
	arrived := s.arrived
	n := len(s.pending)
	s.mu.Unlock()
	if n == 0 {
		<-arrived
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Delete: %v", err)
	}
	if p := s.Pending(); len(p) != 0 {
		t.Fatalf("pending after cancel: %v", p)
	}

	// Close fails what is pending.
	go func() { errc <- s.Delete(context.Background(), "/d", -1) }()
	s.Next(OpDelete, "/d").Fail(zk.ErrNoNode)
	if err := <-errc; !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("Delete answered ErrNoNode: %v", err)
	}
	go func() { errc <- s.Sync(context.Background(), "/e") }()
	s.Next("sync", "/e")
	go func() { errc <- s.Delete(context.Background(), "/f", -1) }()
	s.Next(OpDelete, "/f")
	s.Close()
	for range 2 {
		if err := <-errc; !errors.Is(err, zk.ErrClosed) {
			t.Fatalf("a call taken, not answered, after Close: %v", err)
		}
	}
	want := "-> children /a watch\n<- children [x y]\nfire NodeChildrenChanged /a\n-> exists /b watch\n<- missing\nsession LOST (expired)\nsession CONNECTED\n-> delete /d\n<- error zk: node does not exist\n-> sync /e\n-> delete /f\n"
	if got := s.Transcript(); got != want {
		t.Fatalf("transcript:\n%s\nwant:\n%s", got, want)
	}
}
