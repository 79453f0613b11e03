package lock_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/benchzk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
)

// The uncontended lock against the bare round trips it is made of, each on
// its own standalone server with forceSync on (as in production and as the
// peer benchmarks run it). Read the ratio of the two ns/op from one run:
//
//	go test ./machines/lock -run '^$' -bench 'Uncontended|RawCreateChildrenDelete'
//
// An acquire+release is: create our node; list the directory and read our
// node's Stat, both in flight together; delete it (in a multi that first
// marks it released). The raw loop makes create, getChildren and delete one
// after the other.

// benchWarmup cycles run before timing starts, so the server has compiled
// its hot paths and the directory exists.
const benchWarmup = 200

func BenchmarkUncontended(b *testing.B) {
	c := benchzk.Conn(b)
	l, err := lock.New(c, "/bench/lock")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ctx := b.Context()
	cycle := func() {
		if _, err := l.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for range benchWarmup {
		cycle()
	}
	for b.Loop() {
		cycle()
	}
}

func BenchmarkRawCreateChildrenDelete(b *testing.B) {
	c := benchzk.Conn(b)
	ctx := b.Context()
	const dir = "/bench/raw"
	benchzk.Dir(b, c, dir)
	prefix := dir + "/_c_" + uuid.NewString() + "-lock-"
	cycle := func() {
		node, err := c.Create(ctx, prefix, nil, zk.ModeEphemeralSequential)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.Children(ctx, dir); err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(ctx, node, zk.AnyVersion); err != nil {
			b.Fatal(err)
		}
	}
	for range benchWarmup {
		cycle()
	}
	for b.Loop() {
		cycle()
	}
}
