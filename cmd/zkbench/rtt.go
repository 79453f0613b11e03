package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// rttBench is the peers' RawRtt through zkrecipes' adapter (adapters/zk on
// go-zookeeper): n sequential calls of each kind on one session, after
// warm-up exists calls. Reads are answered from the server's memory; writes
// go through its transaction log (fsync with forceSync=yes). children_us
// lists a node with 10 children, about a busy lock's directory.
// delete_notify_us (not in the peers' lines) times a delete from its start
// to the watch event it fires at another session: the least a lock or
// leadership handoff can cost.
func rttBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("rtt")
	n := c.fs.Int("n", 1000, "calls per operation")
	warm := c.fs.Int("warmup", 2000, "unmeasured exists calls first")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	if *n < 1 {
		return nil, errors.New("-n must be at least 1")
	}
	tg := c.target()
	conn, err := tg.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	watcher, err := tg.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer watcher.Close()
	for range *warm {
		if _, _, err := conn.Exists(ctx, "/"); err != nil {
			return nil, err
		}
	}
	dir, ten := c.path, c.path+"/ten"
	if err := createParents(ctx, conn, ten); err != nil {
		return nil, err
	}
	for i := range 10 {
		if _, err := conn.Create(ctx, fmt.Sprintf("%s/k%d", ten, i), nil, zk.ModePersistent); err != nil {
			return nil, err
		}
	}
	data := make([]byte, 32)
	ops := []struct {
		key string
		do  func(i int) error
	}{
		{"exists_us", func(int) error { _, _, err := conn.Exists(ctx, "/"); return err }},
		{"get_us", func(int) error { _, _, err := conn.Get(ctx, dir); return err }},
		{"set_us", func(int) error { _, err := conn.Set(ctx, dir, data, zk.AnyVersion); return err }},
		{"create_us", func(i int) error {
			_, err := conn.Create(ctx, fmt.Sprintf("%s/n%d", dir, i), data, zk.ModePersistent)
			return err
		}},
		{"children_us", func(int) error { _, _, err := conn.Children(ctx, ten); return err }},
		{"delete_us", func(i int) error { return conn.Delete(ctx, fmt.Sprintf("%s/n%d", dir, i), zk.AnyVersion) }},
	}
	params := obj{{"n", *n}, {"warmup", *warm}, {"session_ms", c.session.Milliseconds()}, {"path", c.path}}
	out := c.header("rtt", params)
	for _, op := range ops {
		lat := make([]time.Duration, *n)
		for i := range *n {
			t0 := time.Now()
			if err := op.do(i); err != nil {
				return nil, fmt.Errorf("%s: %w", op.key, err)
			}
			lat[i] = time.Since(t0)
		}
		out = append(out, field{op.key, summary(lat, micros)})
	}
	notify, err := deleteNotify(ctx, conn, watcher, dir, *n)
	if err != nil {
		return nil, fmt.Errorf("delete_notify_us: %w", err)
	}
	out = append(out, field{"delete_notify_us", summary(notify, micros)})
	if err := deleteTree(ctx, conn, dir); err != nil {
		return nil, err
	}
	return append(out, field{"errors", []string{}}, field{"ok", true}), nil
}

// deleteNotify times n deletes by conn, each from its start to the
// NodeDeleted event at watcher, which watches the node.
func deleteNotify(ctx context.Context, conn, watcher zk.Conn, dir string, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	for i := range n {
		d, err := timeDeleteNotify(ctx, conn, watcher, fmt.Sprintf("%s/w%d", dir, i))
		if err != nil {
			return nil, err
		}
		lat[i] = d
	}
	return lat, nil
}

// timeDeleteNotify creates node by conn, watches it from watcher, and times
// its delete by conn from the start of the delete to watcher's NodeDeleted.
func timeDeleteNotify(ctx context.Context, conn, watcher zk.Conn, node string) (time.Duration, error) {
	if _, err := conn.Create(ctx, node, nil, zk.ModePersistent); err != nil {
		return 0, err
	}
	_, _, ch, err := watcher.ExistsW(ctx, node)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := conn.Delete(ctx, node, zk.AnyVersion); err != nil {
		return 0, err
	}
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDeleted {
			return 0, fmt.Errorf("watch on %s: %v", node, ev.Type)
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return time.Since(t0), nil
}

// createParents creates path and its missing ancestors as persistent nodes.
func createParents(ctx context.Context, c zk.Conn, path string) error {
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		_, err := c.Create(ctx, path[:i], nil, zk.ModePersistent)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}
