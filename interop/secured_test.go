package interop

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// On a secured ensemble a Curator client with our digest identity and a
// namespace equal to our chroot takes its place in our lock's line and we
// take ours in its, while another identity can read the line but delete
// nobody's node.
func TestLockWithCuratorSecured(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const chroot, dir = "/apps/billing", "/locks/secured"
	conn := connectWith(t, srv.Addr(), zk.WithAuth("digest", []byte("alice:s3cret")), zk.WithChroot(chroot))
	bob := connectWith(t, srv.Addr(), zk.WithAuth("digest", []byte("bob:other")))
	t.Setenv("CURATOR_AUTH", "digest:alice:s3cret")
	t.Setenv("CURATOR_NAMESPACE", strings.TrimPrefix(chroot, "/"))
	cur := startCurator(t, t0, srv.Addr(), "mutex", dir, "curator")

	l, err := lock.New(conn, dir, lock.WithID("go"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sub := l.Subscribe()
	defer sub.Close()

	// Curator holds under the chroot: its node is where ours go.
	curNode := cur.ask("acquire 5000", "ACQUIRED")
	if !strings.HasPrefix(curNode, dir+"/") {
		t.Fatalf("Curator's node %s is not in %s (its namespace should be our chroot)", curNode, dir)
	}
	if ok, _, err := l.TryAcquire(ctx); err != nil || ok {
		t.Fatalf("TryAcquire while Curator holds = %v, %v; want false, nil", ok, err)
	}

	// Our Acquire waits behind Curator's node.
	got := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx)
		got <- err
	}()
	testkit.WaitEvent(t, sub, events.ReadyStart)
	kids := awaitChildren(t, ctx, conn, dir, 2)
	if dir+"/"+kids[0] != curNode {
		t.Fatalf("the line is %v; want Curator's %s first", kids, curNode)
	}
	ourNode := dir + "/" + kids[1]

	// Another identity sees both nodes (world read) and deletes neither.
	for _, node := range []string{curNode, ourNode} {
		if _, ok, err := bob.Exists(ctx, chroot+node); err != nil || !ok {
			t.Fatalf("bob: Exists(%s) = %v, %v; want it there", chroot+node, ok, err)
		}
		if _, _, err := bob.Get(ctx, chroot+node); err != nil {
			t.Fatalf("bob: Get(%s): %v; anyone may read", chroot+node, err)
		}
	}
	if err := bob.Delete(ctx, chroot+curNode, zk.AnyVersion); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("bob deleting Curator's node: %v; want zk.ErrNoAuth", err)
	}
	if err := bob.Delete(ctx, chroot+ourNode, zk.AnyVersion); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("bob deleting our node: %v; want zk.ErrNoAuth", err)
	}
	if _, err := bob.Create(ctx, chroot+dir+"/lock-", nil, zk.ModeEphemeralSequential); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("bob joining the line: %v; want zk.ErrNoAuth", err)
	}

	// Curator releases; we hold. Curator then queues behind us and gets
	// the lock when we release.
	cur.send("release")
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(step):
		t.Fatalf("Acquire did not return within %v of Curator's release", step)
	}
	cur.await("RELEASED")
	cur.send("acquire 10000")
	awaitChildren(t, ctx, conn, dir, 2)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cur.await("ACQUIRED")
	cur.ask("release", "RELEASED")
	if kids := awaitChildren(t, ctx, conn, dir, 0); len(kids) != 0 {
		t.Errorf("nodes left after both released: %v", kids)
	}
}

// connectWith opens a Go connection to addr with opts, closed when the
// test ends.
func connectWith(t *testing.T, addr string, opts ...zk.Option) zk.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), step)
	defer cancel()
	c, err := zk.Connect(ctx, []string{addr}, append([]zk.Option{zk.WithSessionTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
