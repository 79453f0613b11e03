package contention

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// forwardWatches waits for the two watches of a watchNode — the mark's and
// the node's deletion — and returns the watchFired input that settles it.
// A release mark's creation is the one, as soon as it comes (the
// deletion's event, from the same transaction, would only come later). A
// hold mark's creation (hold) is posted at once too, and the deletion
// after it. Otherwise the deletion is the one. The adapter fills watch
// channels in the server's order, so when the deletion is there, a mark
// made before it is there too.
func forwardWatches(ctx context.Context, sh *runtime.Shell[Input, command], cmd uint64, markW, deleteW <-chan zk.WatchEvent, hold bool) (Input, bool) {
	fire := func(ev zk.WatchEvent) Input { return fired{What: watchFired, Cmd: cmd, Event: ev} }
	// decisive reports whether a mark's event settles the watch: a
	// release mark's creation does; a hold mark's creation is posted on
	// its own and the deletion is still waited for.
	decisive := func(ev zk.WatchEvent) bool {
		if ev.Type != zk.EventNodeCreated {
			return false
		}
		if !hold {
			return true
		}
		sh.Post(ctx, fire(ev), true)
		return false
	}
	select {
	case ev := <-markW:
		if decisive(ev) {
			return fire(ev), true
		}
	case ev := <-deleteW:
		select {
		case m := <-markW:
			if decisive(m) {
				return fire(m), true
			}
		default:
		}
		return fire(ev), true
	case <-ctx.Done():
		return nil, false
	}
	select {
	case ev := <-deleteW:
		return fire(ev), true
	case <-ctx.Done():
		return nil, false
	}
}

// forwardEach posts one watchFired per watch in ws, as each fires, the
// last as the goroutine's answer; it stops early when ctx ends.
func forwardEach(ctx context.Context, sh *runtime.Shell[Input, command], cmd uint64, ws []<-chan zk.WatchEvent) (Input, bool) {
	events := make(chan zk.WatchEvent, len(ws))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, w := range ws {
		wg.Go(func() {
			select {
			case ev := <-w:
				events <- ev
			case <-ctx.Done():
			}
		})
	}
	for i := range ws {
		select {
		case ev := <-events:
			if i == len(ws)-1 {
				return fired{What: watchFired, Cmd: cmd, Event: ev}, true
			}
			sh.Post(ctx, fired{What: watchFired, Cmd: cmd, Event: ev}, true)
		case <-ctx.Done():
			return nil, false
		}
	}
	return nil, false
}

// exec makes cmd's requests off the actor (runtime.Spec.Exec), each in a
// CLIENT span made by op, and posts their replies back as inputs.
func (in *Instance) exec(sh *runtime.Shell[Input, command], cmd command, op runtime.Op) {
	conn := in.conn
	// answer makes the one request, f, of a command whose reply is its
	// error alone (done What), expecting the errors expect; a delete's
	// in order with the listings (GoInOrder, see stale).
	answer := func(what, name, node string, f func(ctx context.Context) error, expect ...error) {
		run := sh.Go
		if what == deleted {
			run = sh.GoInOrder
		}
		run(func(ctx context.Context) (Input, bool) {
			return done{What: what, Cmd: cmd.ID(), Err: ask(runtime.Expect(ctx, expect...), op, name, node, f)}, true
		})
	}
	// event makes the input for an event of the watch What cmd left.
	event := func(what string) func(zk.WatchEvent) Input {
		return func(ev zk.WatchEvent) Input { return fired{What: what, Cmd: cmd.ID(), Event: ev} }
	}
	switch c := cmd.(type) {
	case createNode:
		sh.Go(func(ctx context.Context) (Input, bool) {
			var path string
			// no_node: the directory is not made yet (the machine makes
			// it and creates again), an expected step of a first acquire.
			err := ask(runtime.Expect(ctx, zk.ErrNoNode), op, "create", "", func(ctx context.Context) (err error) {
				if c.Beside == "" {
					path, err = conn.Create(ctx, c.Prefix, c.Data, zk.ModeEphemeralSequential)
					runtime.SetNode(ctx, path)
					return err
				}
				path = c.Prefix + c.Seq
				runtime.SetNode(ctx, path)
				_, err = conn.Multi(ctx,
					&zk.CheckOp{Path: c.Beside, Version: zk.AnyVersion},
					&zk.CreateOp{Path: path, Data: c.Data, Mode: zk.ModeEphemeral})
				return err
			})
			return created{Cmd: c.Cmd, Path: path, Err: err}, true
		})
	case ensureDir:
		sh.Go(func(ctx context.Context) (Input, bool) {
			return done{What: dirEnsured, Cmd: c.Cmd, Err: runtime.EnsurePath(ctx, conn, op, c.Dir, zk.ModeContainer)}, true
		})
	case readDir:
		sh.GoInOrder(func(ctx context.Context) (Input, bool) { // in order with deletes: see stale
			r := dirRead{Cmd: c.Cmd}
			var ownW <-chan zk.WatchEvent
			var ownErr, childErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				ownErr = ask(runtime.Expect(ctx, zk.ErrNoNode), op, "children", c.Own, func(ctx context.Context) (err error) {
					_, r.Own, ownW, err = conn.ChildrenW(ctx, c.Own)
					return err
				})
			})
			childErr = ask(ctx, op, "children", "", func(ctx context.Context) (err error) {
				r.Children, _, err = conn.Children(ctx, c.Dir)
				return err
			})
			wg.Wait()
			r.OwnExists = ownErr == nil
			if errors.Is(ownErr, zk.ErrNoNode) {
				ownErr = nil
			}
			// Both errors count: a read of our node that failed (a lost
			// reply) says nothing about the node, and must be retried
			// like a failed listing, never taken for its absence.
			r.Err = errors.Join(childErr, ownErr)
			r.Session = conn.SessionID()
			return reply(ctx, sh, r, ownW, false, func(ev zk.WatchEvent) Input {
				return fired{What: ownNodeGone, Cmd: c.Cmd, Event: ev, ConnClosed: conn.State() == zk.StateClosed}
			})
		})
	case listDir:
		sh.GoInOrder(func(ctx context.Context) (Input, bool) { // in order with deletes: see stale
			r := dirListed{Cmd: c.Cmd}
			if !c.Relist {
				// The hunt for a create whose reply was lost: that create
				// may be committed and not yet applied on the server we
				// now talk to (another one, after a reconnect). Listed
				// without the sync, it could be missed, made again, and
				// the first one left below ours as a ghost we wait on.
				if r.Err = ask(ctx, op, "sync", "", func(ctx context.Context) error { return conn.Sync(ctx, c.Dir) }); r.Err != nil {
					return r, true
				}
			}
			r.Err = ask(ctx, op, "children", "", func(ctx context.Context) (err error) {
				r.Children, _, err = conn.Children(ctx, c.Dir)
				return err
			})
			r.Session = conn.SessionID()
			return r, true
		})
	case watchNode:
		if c.Promotion {
			sh.Go(func(ctx context.Context) (Input, bool) {
				var st zk.Stat
				var w <-chan zk.WatchEvent
				err := ask(runtime.Expect(ctx, zk.ErrNoNode), op, "get", c.Path, func(ctx context.Context) (err error) {
					_, st, w, err = conn.GetW(ctx, c.Path)
					return err
				})
				r := watching{Cmd: c.Cmd, Exists: err == nil, Held: err == nil && st.Version > 0}
				if err != nil && !errors.Is(err, zk.ErrNoNode) {
					r.Err = err
				}
				return reply(ctx, sh, r, w, true, event(watchFired))
			})
			return
		}
		sh.Go(func(ctx context.Context) (Input, bool) {
			var markW, deleteW <-chan zk.WatchEvent
			var markErr error
			var held bool
			var wg sync.WaitGroup
			if !c.Plain {
				wg.Go(func() {
					mark := ReleaseMark(c.Path)
					if c.Hold {
						mark = HoldMark(c.Path)
					}
					markErr = ask(ctx, op, "exists", mark, func(ctx context.Context) (err error) {
						_, held, markW, err = conn.ExistsW(ctx, mark)
						return err
					})
				})
			}
			// no_node: the node we wait for is gone already.
			childErr := ask(runtime.Expect(ctx, zk.ErrNoNode), op, "children", c.Path, func(ctx context.Context) (err error) {
				_, _, deleteW, err = conn.ChildrenW(ctx, c.Path)
				return err
			})
			wg.Wait()
			r := watching{Cmd: c.Cmd, Exists: childErr == nil, Held: c.Hold && held, Err: markErr}
			if childErr != nil && !errors.Is(childErr, zk.ErrNoNode) {
				r.Err = errors.Join(childErr, markErr) // a lost reply to either is retried
			}
			if len(deleteW) > 0 && len(markW) == 0 {
				// The node went before the replies came (the adapter hands
				// an event over before any later reply), with no mark
				// before it: the mark's watch was set after, or the node
				// went plainly. Gone, as if found gone: the machine fires
				// that watch even if its term is over by now.
				r.Exists, deleteW = false, nil
			}
			if deleteW == nil {
				return r, true
			}
			sh.Post(ctx, r, true)
			return forwardWatches(ctx, sh, c.Cmd, markW, deleteW, c.Hold)
		})
	case fireMark:
		answer(markFired, "multi", c.Path, func(ctx context.Context) error {
			_, err := conn.Multi(ctx,
				&zk.CreateOp{Path: c.Path, Mode: zk.ModeEphemeral},
				&zk.DeleteOp{Path: c.Path, Version: zk.AnyVersion})
			return err
		})
	case promote:
		answer(promoted, "set", c.Node, func(ctx context.Context) error {
			_, err := conn.Set(ctx, c.Node, c.Data, 0)
			return err
		})
	case checkNodes:
		sh.Go(func(ctx context.Context) (Input, bool) {
			r := nodesChecked{Cmd: c.Cmd, Exists: make([]bool, len(c.Paths))}
			errs := make([]error, len(c.Paths))
			watches := make([]<-chan zk.WatchEvent, len(c.Paths))
			var wg sync.WaitGroup
			for i, p := range c.Paths {
				wg.Go(func() {
					errs[i] = ask(runtime.Expect(ctx, zk.ErrNoNode), op, "children", p, func(ctx context.Context) (err error) {
						_, _, watches[i], err = conn.ChildrenW(ctx, p)
						return err
					})
					r.Exists[i] = errs[i] == nil
					if errors.Is(errs[i], zk.ErrNoNode) {
						errs[i] = nil
					}
				})
			}
			wg.Wait()
			r.Err = errors.Join(errs...)
			var live []<-chan zk.WatchEvent
			for i, w := range watches {
				if r.Exists[i] && w != nil {
					live = append(live, w)
				}
			}
			if r.Err != nil || len(live) == 0 {
				return r, true // a failed check is sent again, with new watches
			}
			sh.Post(ctx, r, true)
			return forwardEach(ctx, sh, c.Cmd, live)
		})
	case announceMark:
		// no_node: our node went meanwhile (released, resigned).
		answer(announced, "multi", c.Path, func(ctx context.Context) error {
			return announce(ctx, conn, c.Node, c.Path)
		}, zk.ErrNoNode)
	case readData:
		sh.Go(func(ctx context.Context) (Input, bool) {
			r := dataRead{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			r.Err = ask(ctx, op, "get", c.Path, func(ctx context.Context) (err error) {
				r.Data, _, w, err = conn.GetW(ctx, c.Path)
				return err
			})
			return reply(ctx, sh, r, w, true, event(dataChanged))
		})
	case deleteNode:
		if !c.Release && len(c.Fire) == 0 {
			// no_node: gone already (the session's end, or a delete
			// whose reply was lost): what was wanted.
			answer(deleted, "delete", c.Path, func(ctx context.Context) error {
				return conn.Delete(ctx, c.Path, zk.AnyVersion)
			}, zk.ErrNoNode)
			return
		}
		marks := c.Fire
		if c.Release {
			marks = append(slices.Clone(c.Fire), ReleaseMark(c.Path))
		}
		var ops []zk.Op
		for _, mark := range marks {
			ops = append(ops, &zk.CreateOp{Path: mark, Mode: zk.ModePersistent}, &zk.DeleteOp{Path: mark, Version: zk.AnyVersion})
		}
		ops = append(ops, &zk.DeleteOp{Path: c.Path, Version: zk.AnyVersion})
		answer(deleted, "multi", c.Path, func(ctx context.Context) error {
			_, err := conn.Multi(ctx, ops...)
			return err
		})
	}
}

// ask makes one request, f, named name in a span of op, on node ("":
// none named), and returns its error.
func ask(ctx context.Context, op runtime.Op, name, node string, f func(ctx context.Context) error) (err error) {
	op(ctx, name, func(ctx context.Context) error {
		runtime.SetNode(ctx, node)
		err = f(ctx)
		return err
	})
	return err
}

// reply answers with r, the reply to a request that may have left a watch,
// w: with none, r is the answer; else r is posted (more: the command's
// span is kept for the event) and the answer is w's event, as ev makes it
// (none if ctx ends first).
func reply(ctx context.Context, sh *runtime.Shell[Input, command], r Input, w <-chan zk.WatchEvent, more bool, ev func(zk.WatchEvent) Input) (Input, bool) {
	if w == nil {
		return r, true
	}
	sh.Post(ctx, r, more)
	select {
	case e := <-w:
		return ev(e), true
	case <-ctx.Done():
		return nil, false
	}
}

// announce makes the hold mark path for node, if node exists, making its
// directory first if it is missing (once: a container the server removed
// just then leaves us without the mark, which only costs the waiter behind
// a read). A directory made for a node gone meanwhile is deleted again,
// unless a mark is in it already: it would never have a child, and the
// server reaps only a container that had one.
func announce(ctx context.Context, conn zk.Conn, node, path string) error {
	mark := func() ([]zk.OpResult, error) {
		return conn.Multi(ctx,
			&zk.CheckOp{Path: node, Version: zk.AnyVersion},
			&zk.CreateOp{Path: path, Mode: zk.ModeEphemeral})
	}
	res, err := mark()
	if errors.Is(err, zk.ErrNoNode) && len(res) == 2 && errors.Is(res[1].Err, zk.ErrNoNode) {
		dir := zk.Parent(path)
		if err := zk.EnsurePath(ctx, conn, dir, zk.ModeContainer); err != nil {
			return err
		}
		if res, err = mark(); errors.Is(err, zk.ErrNoNode) && len(res) == 2 && errors.Is(res[0].Err, zk.ErrNoNode) {
			_ = conn.Delete(ctx, dir, zk.AnyVersion) // refused when not empty
		}
	}
	return err
}
