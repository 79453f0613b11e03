package discovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A registration's lifecycle through the discovery handle, on a scripted
// connection (the machine is group's, whose own transcripts cover its
// corner cases): the create finds no service path and makes it (and the
// base) as containers, then our node with Curator's JSON; its data watch;
// Update's set; the session's end, after which our node is made again on
// the new session with the latest JSON; Close's delete.
func TestTranscriptLifecycle(t *testing.T) {
	s := testkit.NewScript(t)
	defer s.Close()
	ctx := ctxT(t)
	in := inst("i-1", 5)
	in.RegistrationTimeUTC = time.UnixMilli(1700000000000)
	type registered struct {
		r   *discovery.Registration
		err error
	}
	done := make(chan registered, 1)
	go func() {
		r, err := discovery.Register(ctx, s, "/services", in)
		done <- registered{r, err}
	}()
	s.Next(testkit.OpCreate, "/services/api/i-1").Fail(zk.ErrNoNode)
	s.Next(testkit.OpCreate, "/services/api").Fail(zk.ErrNoNode)
	s.Next(testkit.OpCreate, "/services").Created("/services")
	s.Next(testkit.OpCreate, "/services/api").Created("/services/api")
	s.Next(testkit.OpCreate, "/services/api/i-1").Created("/services/api/i-1")
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	r := got.r
	rec := testkit.Record(t, r)
	watch := s.Next(testkit.OpGet, "/services/api/i-1")
	watch.Node(nil, zk.Stat{EphemeralOwner: s.SessionID()})

	s.Note("Update: the new address")
	updated := make(chan error, 1)
	go func() { updated <- r.Update(ctx, inst("i-1", 6)) }()
	s.Next(testkit.OpSet, "/services/api/i-1").OK()
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	watch.Fire(zk.EventNodeDataChanged)
	s.Next(testkit.OpGet, "/services/api/i-1").Node(nil, zk.Stat{EphemeralOwner: s.SessionID(), Version: 1})

	s.Note("the session ends: our node is made again on the new one, with the latest JSON")
	s.Expire()
	s.Next(testkit.OpCreate, "/services/api/i-1").Created("/services/api/i-1")
	rec.WaitFor(t, events.MemberJoined)
	s.Next(testkit.OpGet, "/services/api/i-1").Node(nil, zk.Stat{EphemeralOwner: s.SessionID()})

	s.Note("Close deregisters")
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	s.Next(testkit.OpDelete, "/services/api/i-1").OK()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := r.Update(context.Background(), in); err == nil {
		t.Error("Update after Close succeeded")
	}
	golden.Check(t, "lifecycle", s.Transcript())
}
