package interop

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Curator's InterProcessReadWriteLock and ours share one path: a writer of
// either excludes the other's readers and writers, readers of both hold
// together, and the nodes are named alike.
func TestRWLockWithCurator(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const dir = "/interop/rwlock"
	conn := connect(t, srv.Addr())
	curW := startCurator(t, t0, srv.Addr(), "write", dir, "curator-writer")
	curR := startCurator(t, t0, srv.Addr(), "read", dir, "curator-reader")
	rw, err := rwlock.New(conn, dir, rwlock.WithID("go"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })

	// Curator's writer holds: neither of our locks can.
	curWriter := curW.ask("acquire 5000", "ACQUIRED")
	checkName(t, "Curator's writer", curWriter, rwlock.WriteMarker)
	for _, l := range []*rwlock.Lock{rw.ReadLock(), rw.WriteLock()} {
		if ok, _, err := l.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire beside Curator's writer = %v, %v", ok, err)
		}
	}
	awaitChildren(t, ctx, conn, dir, 1)

	// Our reader waits for Curator's writer, then holds.
	sub := rw.ReadLock().Subscribe()
	defer sub.Close()
	got := make(chan error, 1)
	var ours *rwlock.Grant
	go func() {
		var err error
		ours, err = rw.ReadLock().Acquire(ctx)
		got <- err
	}()
	// Our reader waits (with one writer below it, its watch is a child
	// watch on the writer's node, which wchp does not list; released
	// before or after the watch is set, the writer is seen gone either
	// way).
	testkit.WaitEvent(t, sub, events.ReadyStart)
	curW.ask("release", "RELEASED")
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	checkName(t, "our reader", ours.Node(), rwlock.ReadMarker)

	// Curator's reader holds beside ours.
	curR.ask("acquire 5000", "ACQUIRED")
	kids := children(t, ctx, conn, dir)
	if len(kids) != 2 {
		t.Fatalf("two readers hold, the lock has %v", kids)
	}
	for _, k := range kids {
		checkName(t, "a reader", dir+"/"+k, rwlock.ReadMarker)
	}
	hs, err := rwlock.Holders(ctx, conn, dir)
	if err != nil || len(hs) != 2 || hs[0].Write || hs[1].Write {
		t.Fatalf("Holders with Curator's reader: %+v, %v", hs, err)
	}

	// Curator's writer queues behind both readers and gets the lock only
	// once both let go.
	curW.send("acquire 10000")
	kids = awaitChildren(t, ctx, conn, dir, 3)
	curWaiting := dir + "/" + kids[2]
	checkName(t, "Curator's waiting writer", curWaiting, rwlock.WriteMarker)
	if err := rw.ReadLock().Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := curW.awaitWithin("ACQUIRED", 300*time.Millisecond); ok {
		t.Fatal("Curator's writer acquired beside Curator's reader")
	}
	curR.ask("release", "RELEASED")
	curW.await("ACQUIRED")
	if kids := children(t, ctx, conn, dir); !slices.Equal(kids, []string{strings.TrimPrefix(curWaiting, dir+"/")}) {
		t.Fatalf("Curator's writer holds; the lock has %v", kids)
	}

	// Our writer waits for Curator's writer, then holds alone.
	done := make(chan error, 1)
	go func() {
		_, err := rw.WriteLock().Acquire(ctx)
		done <- err
	}()
	awaitChildren(t, ctx, conn, dir, 2)
	curW.ask("release", "RELEASED")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ok := curR.ask("acquire 300", "TIMEOUT"); ok != "" {
		t.Fatalf("Curator's reader beside our writer: %q", ok)
	}
	if err := rw.WriteLock().Release(ctx); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, ctx, conn, dir); len(kids) != 0 {
		t.Errorf("nodes left: %v", kids)
	}
}
