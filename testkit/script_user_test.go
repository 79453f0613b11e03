package testkit_test

import (
	"context"
	"errors"
	"flag"
	"path"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// update rewrites the golden transcripts in testdata (testkit.Golden).
var _ = flag.Bool("update", false, "rewrite golden files")

// TestScriptLockWaitsThenLosesItsSession drives a lock through its
// connection with no server: a holder ahead of us, its node's deletion,
// our grant, then the connection's loss. Every request and answer is in a
// golden transcript; the lifecycle events are waited for with a Recorder.
func TestScriptLockWaitsThenLosesItsSession(t *testing.T) {
	s := testkit.NewScript(t)
	defer s.Close()
	l, err := lock.New(s, "/app/lock")
	if err != nil {
		t.Fatal(err)
	}
	rec := testkit.Record(t, l)
	granted := make(chan *lock.Grant, 1)
	go func() {
		g, err := l.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		granted <- g
	}()

	create := s.Next(testkit.OpCreate, "/app/lock/*")
	create.CreatedSeq(2)
	ours := path.Base(create.Path) + "0000000002"
	holder := "_c_0b4e3a5c-8a1f-4d8e-9c47-1a2b3c4d5e6f-lock-0000000001"
	s.Next(testkit.OpChildren, "/app/lock").Children(zk.Stat{}, holder, ours)
	s.Next(testkit.OpChildren, "/app/lock/"+ours).Children(zk.Stat{Czxid: 42, EphemeralOwner: s.SessionID()})
	// It waits behind the holder: the holder's release mark and its node.
	mark := s.Next(testkit.OpExists, "/app/lock/"+holder+".released")
	mark.Missing()
	node := s.Next(testkit.OpChildren, "/app/lock/"+holder)
	node.Children(zk.Stat{Czxid: 41})

	s.Note("the holder releases: its mark is made in the transaction that deletes its node")
	mark.Fire(zk.EventNodeCreated)
	g := <-granted
	if g.Token() != 42 {
		t.Fatalf("token %d, want our node's czxid 42", g.Token())
	}
	node.Fire(zk.EventNodeDeleted)

	s.Note("the connection drops while we hold")
	s.Session(zk.StateSuspended)
	rec.WaitFor(t, events.Suspended)
	<-g.Lost()
	if !errors.Is(g.Err(), lock.ErrSuspended) {
		t.Fatalf("lost with %v, want ErrSuspended", g.Err())
	}
	s.Session(zk.StateReconnected)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	s.Next(testkit.OpDelete, "/app/lock/"+ours).OK()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "script_lock_waits_then_loses_its_session", s.Transcript())
}
