package discovery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// The registration's session expires: its instance leaves a provider on
// another connection, and comes back, with the latest Update's data, once
// it is registered again on the new session.
func TestExpiry(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		p := must[*discovery.Provider](t)(discovery.NewProvider(tg.Connect(t), "/services", "api"))
		closeOnCleanup(t, p)
		sub := p.Subscribe()
		defer sub.Close()
		r := must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", inst("i-1", 5)))
		closeOnCleanup(t, r)
		if err := r.Update(ctx, inst("i-1", 6)); err != nil {
			t.Fatal(err)
		}
		waitInstances(t, p, "i-1@10.0.0.6:8080")
		tg.Expire(t, c)
		testkit.WaitEvent(t, sub, events.MemberLeft)
		ev := testkit.WaitEvent(t, sub, events.MemberJoined)
		if got := p.Instances(); len(got) != 1 || got[0].Address != "10.0.0.6" || ev.Err != nil {
			t.Errorf("after re-registration: %q (event err %v)", ids(got), ev.Err)
		}
		if st, _, err := c.Exists(ctx, r.Node()); err != nil || st.EphemeralOwner != c.SessionID() {
			t.Errorf("%s owned by %#x (%v), not the new session %#x", r.Node(), st.EphemeralOwner, err, c.SessionID())
		}
	})
}

// A connection drop on either side: the instance stays registered (the
// session lives), an Update made while the registration is cut off is
// written once it is back, and a provider cut off catches up with it.
func TestDisconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, pc := tg.Connect(t), tg.Connect(t)
		p := must[*discovery.Provider](t)(discovery.NewProvider(pc, "/services", "api"))
		closeOnCleanup(t, p)
		r := must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", inst("i-1", 5)))
		closeOnCleanup(t, r)
		waitInstances(t, p, "i-1@10.0.0.5:8080")
		rsub := r.Subscribe()
		defer rsub.Close()
		tg.Disconnect(t, c)
		tg.Disconnect(t, pc)
		done := make(chan error, 1)
		go func() { done <- r.Update(ctx, inst("i-1", 6)) }()
		testkit.WaitEvent(t, rsub, events.Suspended)
		if got := ids(p.Instances()); len(got) != 1 {
			t.Errorf("a cut-off provider forgot its instances: %q", got)
		}
		tg.Reconnect(t, c)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		tg.Reconnect(t, pc)
		waitInstances(t, p, "i-1@10.0.0.6:8080")
		if r.State() != events.StateReady {
			t.Errorf("registration state %s", r.State())
		}
	})
}

// A create whose reply was lost made our node: Register takes it (it is
// this session's) and a provider sees one instance.
func TestLostCreateReply(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		if err := zk.EnsurePath(ctx, c, "/services/api", zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		f := tg.LoseNextReply(t, c, testkit.OpCreate, "/services/api/i-1")
		r := must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", inst("i-1", 5)))
		closeOnCleanup(t, r)
		select {
		case <-f.Fired():
		default:
			t.Fatal("the create's reply was not lost")
		}
		p := must[*discovery.Provider](t)(discovery.NewProvider(tg.Connect(t), "/services", "api"))
		closeOnCleanup(t, p)
		waitInstances(t, p, "i-1@10.0.0.5:8080")
		if st, _, err := c.Exists(ctx, r.Node()); err != nil || st.EphemeralOwner != c.SessionID() {
			t.Errorf("%s owned by %#x (%v), not ours %#x", r.Node(), st.EphemeralOwner, err, c.SessionID())
		}
	})
}

// Register's ctx ends while its create is applied but unanswered:
// Register returns ctx's error and deletes the node, or (the reply came
// first) returns the registration. Never an instance without a
// registration. A provider's Instance and Initialized return ctx's error.
func TestCancelled(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, w := tg.Connect(t), tg.Connect(t)
		if err := zk.EnsurePath(ctx, w, "/services/api", zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		f := tg.HoldNextReply(t, c, testkit.OpCreate, "/services/api/i-1")
		rctx, cancel := context.WithCancel(ctx)
		type registered struct {
			r   *discovery.Registration
			err error
		}
		done := make(chan registered, 1)
		go func() {
			r, err := discovery.Register(rctx, c, "/services", inst("i-1", 5))
			done <- registered{r, err}
		}()
		<-f.Fired()
		cancel()
		f.Release()
		got := <-done
		_, there, err := w.Exists(ctx, "/services/api/i-1")
		switch {
		case err != nil:
			t.Fatal(err)
		case errors.Is(got.err, context.Canceled):
			if there {
				t.Error("the node is left after the cancelled Register returned")
			}
		case got.err == nil:
			t.Log("the reply came with the ctx's end: registered")
			if err := got.r.Close(); err != nil || !there {
				t.Errorf("registered, node there %t, close %v", there, err)
			}
		default:
			t.Fatalf("Register: %v", got.err)
		}

		// A provider cut off before its first load: Instance returns with
		// ctx; once loaded, Instance serves from memory, ctx or not.
		pc := tg.Connect(t)
		tg.Disconnect(t, pc)
		p := must[*discovery.Provider](t)(discovery.NewProvider(pc, "/services", "api"))
		closeOnCleanup(t, p)
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := p.Instance(cctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Instance before the first load, ctx ended: %v", err)
		}
		r := must[*discovery.Registration](t)(discovery.Register(ctx, w, "/services", inst("i-2", 6)))
		closeOnCleanup(t, r)
		tg.Reconnect(t, pc)
		if err := p.Initialized(ctx); err != nil {
			t.Fatal(err)
		}
		<-cctx.Done()
		if got, err := p.Instance(cctx); err != nil || got.ID != "i-2" {
			t.Errorf("Instance once loaded, ctx ended: %v, %v", got.ID, err)
		}
	})
}

// Close deregisters at once (no session timeout to wait), and a provider
// on another connection sees the instance leave; a closed provider says
// ErrClosed and keeps its last Instances.
func TestCloseDeregisters(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		p := must[*discovery.Provider](t)(discovery.NewProvider(tg.Connect(t), "/services", "api"))
		r := must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", inst("i-1", 5)))
		r2 := must[*discovery.Registration](t)(discovery.Register(ctx, c, "/services", inst("i-2", 6)))
		closeOnCleanup(t, r2)
		waitInstances(t, p, "i-1@10.0.0.5:8080", "i-2@10.0.0.6:8080")
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, there, err := c.Exists(ctx, "/services/api/i-1"); there || err != nil {
			t.Errorf("/services/api/i-1 after Close: there %t, %v", there, err)
		}
		waitInstances(t, p, "i-2@10.0.0.6:8080")
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Instance(ctx); !errors.Is(err, discovery.ErrClosed) {
			t.Errorf("Instance after Close: %v", err)
		}
		if err := p.Initialized(ctx); !errors.Is(err, discovery.ErrClosed) {
			t.Errorf("Initialized after Close: %v", err)
		}
		if got := ids(p.Instances()); len(got) != 1 || p.State() != events.StateStop {
			t.Errorf("after Close: instances %q, state %s", got, p.State())
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}
