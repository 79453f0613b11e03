package secured_test

import (
	"context"
	"path"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/oteltest"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestChrootLock: alice under the chroot /a and bob under /b take "the
// same" lock /locks/x at once, and both hold it: they are two locks on
// the server, which a connection without a chroot sees as /a/locks/x and
// /b/locks/x. Everything the handles show (grant nodes, Holders, the
// events' paths and nodes, every span's name and attributes) is relative
// to the chroot.
func TestChrootLock(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		const dir = "/locks/x"
		root := tg.Connect(t, alicePW, bobPW) // sees both trees, and may clean them up
		t.Cleanup(func() { removeTree(t, root, "/a"); removeTree(t, root, "/b") })
		rec := oteltest.New(t)
		type side struct {
			chroot string
			conn   zk.Conn
			l      *lock.Lock
			sub    *events.Subscription
			g      *lock.Grant
		}
		sides := []*side{{chroot: "/a"}, {chroot: "/b"}}
		for i, s := range sides {
			s.conn = tg.Connect(t, []zk.Option{alicePW, bobPW}[i], zk.WithChroot(s.chroot))
			s.l = mustLock(t, s.conn, dir, lock.WithID(s.chroot), lock.WithTracerProvider(rec.TP))
			s.sub = s.l.Subscribe()
			defer s.sub.Close()
		}
		for _, s := range sides {
			ok, g, err := s.l.TryAcquire(ctx)
			check(t, err)
			if !ok {
				t.Fatalf("under %s: TryAcquire(%s) found the lock held, though the other chroot's holder is elsewhere", s.chroot, dir)
			}
			s.g = g
		}

		for _, s := range sides {
			if path.Dir(s.g.Node()) != dir {
				t.Errorf("under %s: grant node %q, want one in %s", s.chroot, s.g.Node(), dir)
			}
			kids, _, err := root.Children(ctx, s.chroot+dir)
			check(t, err)
			if len(kids) != 1 || kids[0] != path.Base(s.g.Node()) {
				t.Errorf("without a chroot, %s%s has %v, want only %s's node %s", s.chroot, dir, kids, s.chroot, path.Base(s.g.Node()))
			}
			hs, err := lock.Holders(ctx, s.conn, dir)
			check(t, err)
			if len(hs) != 1 || hs[0].Node != s.g.Node() || hs[0].ID != s.chroot {
				t.Errorf("under %s: Holders %+v, want %s on %s", s.chroot, hs, s.chroot, s.g.Node())
			}
			hs, err = lock.Holders(ctx, root, s.chroot+dir)
			check(t, err)
			if len(hs) != 1 || hs[0].Node != s.chroot+s.g.Node() {
				t.Errorf("without a chroot: Holders of %s%s %+v, want %s%s", s.chroot, dir, hs, s.chroot, s.g.Node())
			}
		}

		// The events from the handle's start to its release's end.
		for _, s := range sides {
			check(t, s.g.Release(ctx))
			named := false // an event names our node: the check is not empty
			for _, ev := range eventsUntil(ctx, t, s.sub, events.StopComplete) {
				named = named || ev.Node == s.g.Node()
				if ev.Path != dir || (ev.Node != "" && !strings.HasPrefix(ev.Node, dir+"/")) {
					t.Errorf("under %s: %s event with path %q, node %q; want %s and a node in it", s.chroot, ev.Type, ev.Path, ev.Node, dir)
				}
			}
			if !named {
				t.Errorf("under %s: no event names the grant's node %s", s.chroot, s.g.Node())
			}
		}

		var nodes int // request spans naming a node in dir: the check is not empty
		for _, sp := range rec.Ended() {
			for _, v := range spanStrings(sp) {
				if strings.HasPrefix(v, "/a/") || strings.HasPrefix(v, "/b/") || strings.Contains(v, " /a/") || strings.Contains(v, " /b/") {
					t.Errorf("span %q shows a path under the chroot: %q", sp.Name(), v)
				}
				if strings.HasPrefix(v, dir+"/") {
					nodes++
				}
			}
		}
		if nodes == 0 {
			t.Errorf("no span names a node in %s; spans: %s", dir, rec.Names())
		}
	})
}

// eventsUntil returns sub's events up to and including the first of type
// last, failing t if ctx ends first.
func eventsUntil(ctx context.Context, t *testing.T, sub *events.Subscription, last events.Type) []events.Event {
	t.Helper()
	var out []events.Event
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription closed before %s; events: %v", last, out)
			}
			out = append(out, ev)
			if ev.Type == last {
				return out
			}
		case <-ctx.Done():
			t.Fatalf("no %s event: %v; events: %v", last, ctx.Err(), out)
		}
	}
}

// spanStrings are a span's name and every string its attributes and its
// events' attributes hold.
func spanStrings(sp sdktrace.ReadOnlySpan) []string {
	out := []string{sp.Name()}
	add := func(kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			switch kv.Value.Type() {
			case attribute.STRING:
				out = append(out, kv.Value.AsString())
			case attribute.STRINGSLICE:
				out = append(out, kv.Value.AsStringSlice()...)
			}
		}
	}
	add(sp.Attributes())
	for _, ev := range sp.Events() {
		add(ev.Attributes)
	}
	return out
}
