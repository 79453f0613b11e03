package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// exec makes one command's requests off the actor and posts their replies
// (and a watch's event) back as inputs.
func (q *Queue) exec(sh *runtime.Shell[input, command], cmd command, op runtime.Op) {
	sh.Go(func(ctx context.Context) (input, bool) { return q.run(ctx, sh, cmd, op) })
}

// run makes cmd's requests and returns the input that answers it (ok
// false: none, its ctx ended while a watch it left was set).
func (q *Queue) run(ctx context.Context, sh *runtime.Shell[input, command], cmd command, op runtime.Op) (in input, ok bool) {
	conn, path := q.conn, q.path
	item := func(name string) string { return zk.Join(path, name) }
	switch c := cmd.(type) {
	case listItems:
		r, w := q.list(ctx, c, op)
		if r.Watched = w != nil; w == nil {
			return r, true
		}
		sh.Post(ctx, r, true)
		_, ok := await(ctx, w)
		return childrenChanged{Cmd: c.Cmd}, ok
	case readItem:
		r := dataRead{Cmd: c.Cmd, Name: c.Name}
		// no_node: another consumer took it first, an expected race.
		op(runtime.Expect(ctx, zk.ErrNoNode), "get", func(ctx context.Context) error {
			runtime.SetNode(ctx, item(c.Name))
			var st zk.Stat
			r.Data, st, r.Err = conn.Get(ctx, item(c.Name))
			r.Version = st.Version
			return r.Err
		})
		return r, true
	case removeItem:
		r := removed{Cmd: c.Cmd, Name: c.Name}
		op(runtime.Expect(ctx, zk.ErrNoNode), "delete", func(ctx context.Context) error {
			runtime.SetNode(ctx, item(c.Name))
			r.Err = conn.Delete(ctx, item(c.Name), zk.AnyVersion)
			return r.Err
		})
		return r, true
	case claimItem:
		_, r := q.multi(ctx, op, nil, &c)
		return r, true
	case watchClaim:
		r := claimWatched{Cmd: c.Cmd, Name: c.Name}
		var w <-chan zk.WatchEvent
		// A claim found gone (the item acked) leaves no watch.
		op(runtime.Expect(ctx, zk.ErrNoNode), "get", func(ctx context.Context) error {
			runtime.SetNode(ctx, zk.Join(item(c.Name), ClaimName))
			r.Exists, w, r.Err = runtime.WatchDeletion(ctx, conn, zk.Join(item(c.Name), ClaimName))
			return r.Err
		})
		if r.Err != nil || !r.Exists {
			return r, true
		}
		sh.Post(ctx, r, true)
		ev, ok := await(ctx, w)
		return claimGone{Cmd: c.Cmd, Name: c.Name, Deleted: ev.Type == zk.EventNodeDeleted}, ok
	case endClaim:
		if c.Next == "" {
			a, _ := q.multi(ctx, op, &c, nil)
			return a, true
		}
		a, r := q.multi(ctx, op, &c, &claimItem{Cmd: c.Cmd, Name: c.Next, Data: c.Data, Item: c.NextData, Version: c.NextVersion})
		sh.Post(ctx, a, true)
		return r, true
	case checkItem:
		var r checked
		session := onOneSession(conn, func() { r = q.check(ctx, c, op) })
		r.Session = session
		return r, true
	case createItems:
		r, name := offered{Req: c.Req}, "create"
		if len(c.Items) > 1 {
			name = "multi"
		}
		op(ctx, name, func(ctx context.Context) error {
			r.Names, r.Err = q.create(ctx, c.Prefix, c.Items)
			return r.Err
		})
		return r, true
	case restoreItem:
		r := restored{Cmd: c.Cmd, Name: c.Name}
		op(ctx, "create", func(ctx context.Context) error {
			runtime.SetNode(ctx, item(c.Name))
			_, r.Err = conn.Create(ctx, item(c.Name), c.Data, zk.ModePersistent)
			return r.Err
		})
		return r, true
	case countItems:
		r := counted{Req: c.Req}
		op(ctx, "exists", func(ctx context.Context) error {
			st, _, err := conn.Exists(ctx, path)
			r.N, r.Err = int(st.NumChildren), err
			return err
		})
		return r, true
	}
	panic(fmt.Sprintf("queue: unknown command %T", cmd))
}

// await waits for a watch's event (ok false: ctx ended first).
func await(ctx context.Context, w <-chan zk.WatchEvent) (ev zk.WatchEvent, ok bool) {
	select {
	case ev := <-w:
		return ev, true
	case <-ctx.Done():
		return ev, false
	}
}

// list lists the queue's children (after a sync when asked), leaving a
// child watch when asked, and returns it; when the path does not exist
// yet, it leaves a watch on its creation instead and answers with no
// items.
func (q *Queue) list(ctx context.Context, c listItems, op runtime.Op) (listed, <-chan zk.WatchEvent) {
	r := listed{Cmd: c.Cmd}
	if c.Sync {
		op(ctx, "sync", func(ctx context.Context) error {
			r.Err = q.conn.Sync(ctx, q.path)
			if errors.Is(r.Err, zk.ErrNoNode) {
				r.Err = nil
			}
			return r.Err
		})
		if r.Err != nil {
			return r, nil
		}
	}
	for {
		var w <-chan zk.WatchEvent
		// no_node: the queue's path is not made yet (no offer so far).
		op(runtime.Expect(ctx, zk.ErrNoNode), "children", func(ctx context.Context) error {
			var st zk.Stat
			if c.Watch {
				r.Children, st, w, r.Err = q.conn.ChildrenW(ctx, q.path)
			} else {
				r.Children, st, r.Err = q.conn.Children(ctx, q.path)
			}
			r.Dir = st.Czxid
			return r.Err
		})
		if !errors.Is(r.Err, zk.ErrNoNode) {
			return r, w
		}
		r.Err = nil
		if !c.Watch {
			return r, nil
		}
		var exists bool
		op(ctx, "exists", func(ctx context.Context) error {
			_, exists, w, r.Err = q.conn.ExistsW(ctx, q.path)
			return r.Err
		})
		if r.Err != nil || !exists {
			return r, w
		}
		// Created meanwhile: the exists watch stays set on the node (a data
		// watch); list it again for its children.
	}
}

// check looks at what became of our write on c.Name whose reply was lost:
// whether the item and its claim exist, and the claim's owner.
func (q *Queue) check(ctx context.Context, c checkItem, op runtime.Op) checked {
	r := checked{Cmd: c.Cmd, Name: c.Name}
	item := zk.Join(q.path, c.Name)
	// The write may be committed and not yet applied on the server we
	// read from now (another one than the write went to, after a
	// reconnect): the sync makes it catch up first, or the reads could
	// miss the write and it be sent again or the item taken for gone.
	op(ctx, "sync", func(ctx context.Context) error {
		r.Err = q.conn.Sync(ctx, item)
		return r.Err
	})
	if r.Err != nil {
		return r
	}
	op(ctx, "exists", func(ctx context.Context) error {
		runtime.SetNode(ctx, item)
		// The claim first: an ack removes both in one multi, so a claim
		// seen before the item was looked at means the item seen gone
		// went with it.
		st, ok, err := q.conn.Exists(ctx, zk.Join(item, ClaimName))
		if r.Err = err; err != nil {
			return err
		}
		if ok {
			r.ClaimOwner = st.EphemeralOwner
		}
		st, r.ItemExists, r.Err = q.conn.Exists(ctx, item)
		r.Version = st.Version
		return r.Err
	})
	return r
}

// create creates items under the queue's path (one create, or a multi for
// several), creating the path first when it is missing: a persistent
// node, its missing parents containers.
func (q *Queue) create(ctx context.Context, prefix string, items [][]byte) ([]string, error) {
	for attempt := 0; ; attempt++ {
		names, err := q.createOnce(ctx, prefix, items)
		if !errors.Is(err, zk.ErrNoNode) || attempt == 2 {
			return names, err
		}
		// The queue's node is persistent, not a container: reaped when
		// empty and made again by the next offer, it would number its
		// items from 0 again, and a consumer whose cache still held an
		// old item's name and data could take the new item of that name
		// and deliver the old data (the chaos suite found it). A queue
		// whose node a Curator client made is a container; its consumers
		// forget the old names once a listing shows the node was made
		// again.
		if err := zk.EnsurePath(ctx, q.conn, q.path, zk.ModePersistent); err != nil {
			return nil, err
		}
	}
}

func (q *Queue) createOnce(ctx context.Context, prefix string, items [][]byte) ([]string, error) {
	p := zk.Join(q.path, prefix)
	if len(items) == 1 {
		n, err := q.conn.Create(ctx, p, items[0], zk.ModePersistentSequential)
		if err != nil {
			return nil, err
		}
		return []string{zk.Base(n)}, nil
	}
	ops := make([]zk.Op, len(items))
	for i, it := range items {
		ops[i] = &zk.CreateOp{Path: p, Data: it, Mode: zk.ModePersistentSequential}
	}
	res, err := q.conn.Multi(ctx, ops...)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(res))
	for i, r := range res {
		names[i] = zk.Base(r.Path)
	}
	return names, nil
}

// multi makes, in one multi, the end of our claim (end: see endClaim,
// with Next "") and our claim of an item (claim: see claimItem), either
// of them nil, and returns their answers. With both, when an op fails
// nothing is applied: the part whose op failed gets that op's error and
// the other part errNotApplied; when the request fails, both get its
// error.
func (q *Queue) multi(ctx context.Context, op runtime.Op, end *endClaim, claim *claimItem) (a acked, r claimed) {
	var ops []zk.Op
	var node string
	if claim != nil { // our claim created, the item's data set to its own at the version read
		item := zk.Join(q.path, claim.Name)
		r, node = claimed{Cmd: claim.Cmd, Name: claim.Name}, zk.Join(item, ClaimName)
		ops = []zk.Op{&zk.CreateOp{Path: node, Data: claim.Data, Mode: zk.ModeEphemeral}, &zk.SetOp{Path: item, Data: claim.Item, Version: claim.Version}}
		// node_exists: claimed by another; no_node: taken by another;
		// bad_version: claimed and given back since read.
		ctx = runtime.Expect(ctx, zk.ErrNodeExists, zk.ErrNoNode, zk.ErrBadVersion)
	}
	if end != nil { // our claim deleted, and the item with it unless Nack, at the version our claim left
		a, node = acked{Cmd: end.Cmd, Name: end.Name}, zk.Join(q.path, end.Name)
		del := &zk.DeleteOp{Path: zk.Join(node, ClaimName), Version: zk.AnyVersion}
		ends := []zk.Op{del, &zk.DeleteOp{Path: node, Version: end.Version}}
		if end.Nack {
			ends = []zk.Op{&zk.CheckOp{Path: node, Version: end.Version}, del}
		}
		ops = append(ends, ops...)
	}
	r.Session = onOneSession(q.conn, func() {
		op(ctx, "multi", func(ctx context.Context) error {
			runtime.SetNode(ctx, node)
			res, err := q.conn.Multi(ctx, ops...)
			i, opErr := opErr(res, err)
			a.Err, r.Err = opErr, opErr
			switch {
			case err == nil && claim != nil:
				r.Version = res[len(ops)-1].Stat.Version
			case end == nil || claim == nil:
			case i >= len(ops)-2:
				a.Err = errNotApplied
			case i >= 0:
				r.Err = errNotApplied
			}
			return err
		})
	})
	return a, r
}

// opErr is the error of a multi that failed (err) on one op: that op's
// index in res and error (-1 and err when no op says).
func opErr(res []zk.OpResult, err error) (int, error) {
	if err == nil {
		return -1, nil
	}
	for i, r := range res {
		if r.Err != nil && !errors.Is(r.Err, zk.ErrRuntimeInconsistency) {
			return i, r.Err
		}
	}
	return -1, err
}

// onOneSession runs f, which makes requests, and returns the session they
// were made on: the connection's, when it was the same before and after
// (0: it changed meanwhile, and they may have gone out on either).
func onOneSession(conn zk.Conn, f func()) int64 {
	session := conn.SessionID()
	f()
	if conn.SessionID() != session {
		return 0
	}
	return session
}
