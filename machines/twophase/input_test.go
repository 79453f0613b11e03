package twophase_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Bad arguments are refused with the package's sentinels before anything
// is sent; an unknown participant is refused before anything is created.
func TestBadInput(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		conn := connect(t, tg)
		h := newRec()
		for _, path := range []string{"", "app", "/", "/app/", "/a//b", "/a/../b"} {
			if _, err := twophase.NewCoordinator(conn, path); !errors.Is(err, zk.ErrInvalidPath) {
				t.Errorf("NewCoordinator(%q) = %v, want ErrInvalidPath", path, err)
			}
			if _, err := twophase.NewParticipant(conn, path, "a", h); !errors.Is(err, zk.ErrInvalidPath) {
				t.Errorf("NewParticipant(%q) = %v, want ErrInvalidPath", path, err)
			}
		}
		for _, id := range []string{"", "a/b", "/", ".", ".."} {
			if _, err := twophase.NewParticipant(conn, root, id, h); !errors.Is(err, twophase.ErrInvalidID) {
				t.Errorf("NewParticipant id %q = %v, want ErrInvalidID", id, err)
			}
		}
		if _, err := twophase.NewParticipant(conn, root, "a", nil); !errors.Is(err, twophase.ErrNilHandler) {
			t.Errorf("nil handler: %v", err)
		}
		if _, err := twophase.NewParticipant(nil, root, "a", h); !errors.Is(err, twophase.ErrClosed) {
			t.Errorf("nil conn: %v", err)
		}
		for _, opt := range []twophase.Option{twophase.WithVoteTimeout(0), twophase.WithRetention(-1), twophase.WithID(""), twophase.WithCloseTimeout(0)} {
			if _, err := twophase.NewCoordinator(conn, root, opt); !errors.Is(err, twophase.ErrInvalidOption) {
				t.Errorf("bad option: %v, want ErrInvalidOption", err)
			}
		}
		// A participant refuses the coordinator's options, and an id of
		// WithID other than its own.
		for name, opt := range map[string]twophase.Option{
			"WithVoteTimeout": twophase.WithVoteTimeout(time.Second), "WithRetention": twophase.WithRetention(time.Second),
			"WithID": twophase.WithID("b"), "WithCloseTimeout": twophase.WithCloseTimeout(-1),
		} {
			if _, err := twophase.NewParticipant(conn, root, "a", h, opt); !errors.Is(err, twophase.ErrInvalidOption) {
				t.Errorf("participant with %s: %v, want ErrInvalidOption", name, err)
			}
		}
		if p, err := twophase.NewParticipant(conn, root, "a", h, twophase.WithID("a"), twophase.WithCloseTimeout(time.Second)); err != nil {
			t.Errorf("participant with WithID of its own id: %v", err)
		} else {
			p.Close()
		}

		serve(t, connect(t, tg), "a", h)
		c := newCoordinator(t, conn)
		for _, tc := range []struct {
			name string
			tx   string
			ps   []string
			want error
		}{
			{"empty tx id", "", []string{"a"}, twophase.ErrInvalidID},
			{"slash in tx id", "x/y", []string{"a"}, twophase.ErrInvalidID},
			{"no participants", "tx", nil, twophase.ErrNoParticipants},
			{"empty participant id", "tx", []string{"a", ""}, twophase.ErrInvalidID},
			{"slash in participant id", "tx", []string{"a/b"}, twophase.ErrInvalidID},
			{"participant twice", "tx", []string{"a", "a"}, twophase.ErrInvalidID},
			{"unknown participant", "tx", []string{"a", "nobody"}, twophase.ErrUnknownParticipant},
		} {
			if _, err := c.Propose(ctx, tc.tx, nil, tc.ps); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
		if _, ok, err := conn.Exists(ctx, root+"/tx/tx"); err != nil || ok {
			t.Errorf("a refused transaction exists: %v %v", ok, err)
		}

		// A transaction id is used once.
		if out, err := c.Propose(ctx, "tx", nil, []string{"a"}); err != nil || !out.Committed {
			t.Fatalf("Propose: %+v %v", out, err)
		}
		if _, err := c.Propose(ctx, "tx", nil, []string{"a"}); !errors.Is(err, twophase.ErrTxExists) {
			t.Errorf("the same id again: %v, want ErrTxExists", err)
		}

		// A cancelled ctx is refused.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.Propose(cctx, "tx2", nil, []string{"a"}); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Propose: %v", err)
		}

		// After Close: ErrClosed.
		c.Close()
		if _, err := c.Propose(ctx, "tx3", nil, []string{"a"}); !errors.Is(err, twophase.ErrClosed) {
			t.Errorf("Propose after Close: %v", err)
		}
		p, err := twophase.NewParticipant(conn, root, "z", h)
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		if err := p.Serve(ctx); !errors.Is(err, twophase.ErrClosed) {
			t.Errorf("Serve after Close: %v", err)
		}
	})
}

// Close stops a Serve in progress (ErrClosed), and a second Serve at once
// is refused (ErrServing).
func TestServeAndClose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		conn := connect(t, tg)
		p, err := twophase.NewParticipant(conn, root, "a", newRec())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Serve(ctx) }()
		waitExists(t, conn, root+"/participants/a")
		if err := p.Serve(ctx); !errors.Is(err, twophase.ErrServing) {
			t.Errorf("a second Serve: %v, want ErrServing", err)
		}
		p.Close()
		if err := <-done; !errors.Is(err, twophase.ErrClosed) {
			t.Errorf("Serve after Close: %v, want ErrClosed", err)
		}
		waitGone(t, conn, root+"/participants/a")
	})
}

// Propose whose ctx ends while waiting for votes decides abort.
func TestCancelledProposeAborts(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a := newRec()
		release := a.gate("tx")
		defer release()
		serve(t, connect(t, tg), "a", a)
		c := newCoordinator(t, connect(t, tg))
		pctx, cancel := context.WithCancel(ctx)
		res := proposeAsync(pctx, c, "tx", nil, "a")
		a.waitFor(t, ctx, "a preparing", func() bool { return a.entered["tx"] == 1 })
		cancel()
		p := recv(t, ctx, res)
		if !errors.Is(p.err, context.Canceled) || p.out.Committed || p.out.Reason != twophase.ReasonCancelled {
			t.Fatalf("cancelled Propose: %+v %v", p.out, p.err)
		}
		release()
		if o := a.outcome(t, ctx, "tx"); o != p.out {
			t.Errorf("a saw %+v", o)
		}
	})
}

// A Commit that fails is called again; the inbox entry goes only once it
// succeeded.
func TestFailedCommitIsRetried(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a := newRec()
		a.failing = 2
		conn := connect(t, tg)
		serve(t, conn, "a", a)
		c := newCoordinator(t, connect(t, tg))
		if out, err := c.Propose(ctx, "tx", nil, []string{"a"}); err != nil || !out.Committed {
			t.Fatalf("Propose: %+v %v", out, err)
		}
		if o := a.outcome(t, ctx, "tx"); !o.Committed {
			t.Errorf("a saw %+v", o)
		}
		a.mu.Lock()
		if a.calls != 3 {
			t.Errorf("%d Commit calls, want 3", a.calls)
		}
		a.mu.Unlock()
		waitGone(t, conn, root+"/inbox/a/tx")
	})
}

// Close while a Propose waits for votes: it returns ErrClosed, and the
// transaction is aborted.
func TestCloseDuringPropose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a := newRec()
		release := a.gate("tx")
		defer release()
		serve(t, connect(t, tg), "a", a)
		c := newCoordinator(t, connect(t, tg))
		res := proposeAsync(ctx, c, "tx", nil, "a")
		a.waitFor(t, ctx, "a preparing", func() bool { return a.entered["tx"] == 1 })
		c.Close()
		if p := recv(t, ctx, res); !errors.Is(p.err, twophase.ErrClosed) {
			t.Fatalf("Propose during Close: %+v %v", p.out, p.err)
		}
		release()
		if o := a.outcome(t, ctx, "tx"); o.Committed || o.Reason != twophase.ReasonCancelled {
			t.Errorf("a saw %+v", o)
		}
	})
}

// The package's sentinels match the ones every recipe shares.
func TestSharedSentinels(t *testing.T) {
	for _, c := range []struct{ err, shared error }{
		{twophase.ErrClosed, zkrecipes.ErrClosed},
		{twophase.ErrInvalidOption, zkrecipes.ErrInvalidOption},
	} {
		if !errors.Is(c.err, c.shared) {
			t.Errorf("%v does not match %v", c.err, c.shared)
		}
	}
}

// Close while the handler's Prepare runs ends that call's ctx: Prepare
// returns, Serve says ErrClosed, and Close is done without waiting out
// its timeout (nil, not ErrCleanupPending); the participant's node goes.
func TestCloseEndsAHandlerCallInFlight(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a := newRec()
		release := a.gate("tx")
		defer release()
		conn := connect(t, tg)
		p, err := twophase.NewParticipant(conn, root, "a", a, twophase.WithCloseTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- p.Serve(ctx) }()
		waitExists(t, conn, root+"/participants/a")
		c := newCoordinator(t, connect(t, tg))
		res := proposeAsync(ctx, c, "tx", nil, "a")
		a.waitFor(t, ctx, "a preparing", func() bool { return a.entered["tx"] == 1 })
		closed := make(chan error, 1)
		go func() { closed <- p.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("Close = %v, want nil", err)
			}
		case <-time.After(20 * time.Second): // its timeout is a minute
			release()
			t.Fatal("Close still waits for the handler's Prepare 20 s on")
		}
		if err := <-served; !errors.Is(err, twophase.ErrClosed) {
			t.Errorf("Serve = %v, want ErrClosed", err)
		}
		a.mu.Lock()
		prepared := a.prepared["tx"]
		a.mu.Unlock()
		if prepared != 0 {
			t.Errorf("Prepare went past its gate %d times, want 0 (its ctx ended)", prepared)
		}
		waitGone(t, conn, root+"/participants/a")
		c.Close()
		recv(t, ctx, res)
	})
}
