package barrier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// exec makes command c's requests off the actor and posts their replies
// (and a watch's event) back as inputs. A Barrier's request is made once.
// A member's request that fails with the connection is made again once
// the session is back (every request here is safe to repeat: our member
// node has one name, and a create that finds it made, or a delete that
// finds it gone, is what was wanted); when the session ended instead, it
// fails with ErrSessionLost.
func (h *handle) exec(sh *runtime.Shell[input, command], c command, op runtime.Op) {
	conn, path := h.conn, h.path
	ready := zk.Join(path, ReadyName)
	do := func(ctx context.Context, name string, f func(ctx context.Context) error) error {
		return retry(ctx, conn, func(ctx context.Context) error {
			var err error
			op(ctx, name, func(ctx context.Context) error { err = f(ctx); return err })
			return err
		})
	}
	// children lists the path's children (none when it is missing).
	children := func(ctx context.Context) (kids []string, err error) {
		err = do(ctx, "children", func(ctx context.Context) (err error) {
			kids, _, err = conn.Children(ctx, path)
			return ignoreNoNode(err)
		})
		return kids, err
	}
	// watchReady reads whether ready exists, leaving a watch on it.
	watchReady := func(ctx context.Context) (exists bool, czxid int64, w <-chan zk.WatchEvent, err error) {
		err = do(ctx, "exists", func(ctx context.Context) (err error) {
			var st zk.Stat
			st, exists, w, err = conn.ExistsW(ctx, ready)
			czxid = st.Czxid
			return err
		})
		return exists, czxid, w, err
	}
	readyEvent := func(t zk.EventType) input { return readyEvent{Cmd: c.Cmd, Type: t} }
	sh.Go(func(ctx context.Context) (input, bool) {
		switch c.Op {
		case opSet:
			err := runtime.EnsurePath(ctx, conn, op, path, zk.ModePersistent)
			return barrierReply{Cmd: c.Cmd, Err: err}, true
		case opRemove:
			var err error
			op(runtime.Expect(ctx, zk.ErrNoNode), "delete", func(ctx context.Context) error {
				runtime.SetNode(ctx, path)
				err = conn.Delete(ctx, path, zk.AnyVersion)
				return err
			})
			return barrierReply{Cmd: c.Cmd, Err: ignoreNoNode(err)}, true
		case opWait:
			// Not an exists: on a barrier not set it would leave a watch
			// waiting for the next Set, one per Wait.
			r := barrierReply{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			op(ctx, "get", func(ctx context.Context) error {
				runtime.SetNode(ctx, path)
				r.Exists, w, r.Err = runtime.WatchDeletion(ctx, conn, path)
				return r.Err
			})
			return postAwait(ctx, sh, r, w, func(t zk.EventType) input { return barrierEvent{Cmd: c.Cmd, Type: t} })
		case opProbe:
			r := probed{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			var wg sync.WaitGroup
			var errData, errKids error
			// Three reads at once: one round trip.
			wg.Go(func() {
				errData = do(ctx, "get", func(ctx context.Context) (err error) {
					r.PathData, _, err = conn.Get(ctx, path)
					return ignoreNoNode(err)
				})
			})
			wg.Go(func() { r.Children, errKids = children(ctx) })
			r.ReadyExists, r.ReadyCzxid, w, r.Err = watchReady(ctx)
			wg.Wait()
			r.Err = errors.Join(r.Err, errData, errKids)
			if r.Err == nil && r.ReadyExists {
				r.Inside, r.Err = h.inside(ctx, do, members(r.Children, ""), r.ReadyCzxid)
			}
			if r.Err != nil {
				return r, true
			}
			return postAwait(ctx, sh, r, w, readyEvent)
		case opJoin:
			r := joined{Cmd: c.Cmd, Name: c.Name}
			r.Err = do(ctx, "create", func(ctx context.Context) (err error) {
				r.ReadyCreated, err = h.join(ctx, c.Name, c.WithReady)
				return err
			})
			if r.Err == nil && !r.ReadyCreated {
				r.Err = do(ctx, "children", func(ctx context.Context) (err error) {
					r.Children, _, err = conn.Children(ctx, path)
					return err
				})
			}
			return r, true
		case opOpenReady, opCheckReady:
			r := readyOpened{Cmd: c.Cmd}
			name, check := "multi", c.Op == opCheckReady
			if check {
				name = "exists"
			}
			r.Err = do(ctx, name, func(ctx context.Context) (err error) {
				r.InProgress, r.Stale, err = h.openReady(ctx, c.Name, c.Stale, check)
				return err
			})
			if errors.Is(r.Err, errReadyGone) {
				r.Gone, r.Err = true, nil
			}
			return r, true
		case opWatchReady:
			r := readyWatched{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			if r.Exists, r.Czxid, w, r.Err = watchReady(ctx); r.Err != nil {
				return r, true
			}
			return postAwait(ctx, sh, r, w, readyEvent)
		case opList, opSyncList:
			r := leaveListed{Cmd: c.Cmd}
			if c.Op == opSyncList {
				r.Err = do(ctx, "sync", func(ctx context.Context) error { return conn.Sync(ctx, path) })
			}
			if r.Err == nil {
				r.Children, r.Err = children(ctx)
			}
			return r, true
		case opDeleteMember:
			r := memberDeleted{Cmd: c.Cmd, Name: c.Name}
			r.Err = do(ctx, "delete", func(ctx context.Context) error {
				return ignoreNoNode(conn.Delete(ctx, zk.Join(path, c.Name), zk.AnyVersion))
			})
			return r, true
		case opWatchMember:
			r := nodeWatched{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			r.Err = do(ctx, "get", func(ctx context.Context) (err error) {
				r.Exists, w, err = runtime.WatchDeletion(ctx, conn, zk.Join(path, c.Name))
				return err
			})
			// deleted, or the watch ended: list again either way
			return postAwait(ctx, sh, r, w, func(zk.EventType) input { return nodeGone{Cmd: c.Cmd} })
		case opDeleteReady:
			return readyDeleted{Cmd: c.Cmd, Err: do(ctx, "delete", func(ctx context.Context) error {
				return ignoreNoNode(conn.Delete(ctx, ready, zk.AnyVersion))
			})}, true
		}
		panic(fmt.Sprintf("barrier: unknown command %v", c))
	})
}

// postAwait posts reply r, then waits for its watch w to fire: the input
// is fired's (zk.EventNotWatching when w ends unfired). With no watch (w
// nil: none was left), r is the command's only input.
func postAwait(ctx context.Context, sh *runtime.Shell[input, command], r input, w <-chan zk.WatchEvent, fired func(zk.EventType) input) (input, bool) {
	if w == nil {
		return r, true
	}
	sh.Post(ctx, r, true)
	select {
	case ev, ok := <-w:
		if !ok {
			ev.Type = zk.EventNotWatching
		}
		return fired(ev.Type), true
	case <-ctx.Done():
		return nil, false
	}
}

// inside reads when each of the member nodes ms was made, at once, and
// returns those made before ready (made at readyCzxid), or with it (the
// arrival that completed the count), that are still there: the members
// of the round in progress.
func (h *handle) inside(ctx context.Context, do func(context.Context, string, func(context.Context) error) error, ms []string, readyCzxid int64) ([]string, error) {
	czxids, errs := make([]int64, len(ms)), make([]error, len(ms))
	var wg sync.WaitGroup
	for i, n := range ms {
		wg.Go(func() {
			errs[i] = do(ctx, "exists", func(ctx context.Context) error {
				st, ok, err := h.conn.Exists(ctx, zk.Join(h.path, n))
				if ok {
					czxids[i] = st.Czxid
				}
				return err
			})
		})
	}
	wg.Wait()
	var in []string
	for i, n := range ms {
		if czxids[i] != 0 && czxids[i] <= readyCzxid {
			in = append(in, n)
		}
	}
	return in, errors.Join(errs...)
}

// join creates our member node; with withReady, ready with it in one
// multi, falling back to our node alone when ready exists. A member node
// found made (by a create whose reply was lost) is ours.
func (h *handle) join(ctx context.Context, name string, withReady bool) (readyCreated bool, err error) {
	ours := zk.Join(h.path, name)
	for attempt := 0; ; attempt++ {
		if withReady {
			_, err = h.conn.Multi(ctx, &zk.CreateOp{Path: ours, Mode: zk.ModeEphemeral},
				&zk.CreateOp{Path: zk.Join(h.path, ReadyName), Mode: zk.ModePersistent})
			if err == nil {
				return true, nil
			}
			if errors.Is(err, zk.ErrNodeExists) {
				withReady = false // ready exists, or our node does: create ours alone
				continue
			}
		} else {
			_, err = h.conn.Create(ctx, ours, nil, zk.ModeEphemeral)
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				return false, nil
			}
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt == 2 {
			return false, err
		}
		if err := h.createPath(ctx); err != nil {
			return false, err
		}
	}
}

// createPath creates the barrier's path, as a container that records the
// member count, and its missing parents.
func (h *handle) createPath(ctx context.Context) error {
	if err := zk.EnsurePath(ctx, h.conn, zk.Parent(h.path), zk.ModeContainer); err != nil {
		return err
	}
	_, err := h.conn.Create(ctx, h.path, []byte(strconv.Itoa(h.members)), zk.ModeContainer)
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// errReadyGone: the ready in openReady's way went before it was read.
var errReadyGone = errors.New("barrier: ready went")

// openReady makes ready, or reads whose the one in its way is. Ours, when
// made with or after our member node (the count that made it had us).
// Made before it, it is not, and not one our look saw unless it is stale:
// when members made before it are still in, a round is in progress
// without us, and they are returned; when none is, it is an earlier
// round's, never deleted, and it is replaced, so that the members
// watching for a new one see it come. With check, nothing is made or
// replaced (our count is not known to be full): a stale ready's creation
// zxid is returned.
//
// Ready is made only while our member node exists (a check in the same
// multi): a request sent before we passed on another member's ready, and
// landing after the round was over (our node goes before ready does),
// must not leave a ready that lets the next round's members through. And
// a ready in the way that goes before we read it is not made again here
// (errReadyGone), for the same reason: the machine watches ready again.
func (h *handle) openReady(ctx context.Context, name string, stale int64, check bool) (inProgress []string, staleCzxid int64, err error) {
	ready, ours := zk.Join(h.path, ReadyName), zk.Join(h.path, name)
	for {
		if !check {
			_, err := h.conn.Multi(ctx, &zk.CheckOp{Path: ours, Version: zk.AnyVersion},
				&zk.CreateOp{Path: ready, Mode: zk.ModePersistent})
			switch {
			case err == nil:
				return nil, 0, nil
			case errors.Is(err, zk.ErrNoNode):
				return nil, 0, ErrSessionLost // our node went: with our session, counted out
			case !errors.Is(err, zk.ErrNodeExists):
				return nil, 0, err
			}
		}
		// Ready's creation and our node's, read at once.
		var (
			st, ourStat      zk.Stat
			readyOK, ourOK   bool
			readyErr, ourErr error
			wg               sync.WaitGroup
		)
		wg.Go(func() { ourStat, ourOK, ourErr = h.conn.Exists(ctx, ours) })
		st, readyOK, readyErr = h.conn.Exists(ctx, ready)
		wg.Wait()
		switch {
		case readyErr != nil || ourErr != nil:
			return nil, 0, errors.Join(readyErr, ourErr)
		case !readyOK:
			return nil, 0, errReadyGone
		case !ourOK:
			return nil, 0, ErrSessionLost
		case st.Czxid >= ourStat.Czxid:
			return nil, 0, nil // made with or after our node: this round's
		case st.Czxid != stale:
			kids, _, err := h.conn.Children(ctx, h.path)
			if err != nil {
				return nil, 0, err
			}
			in, err := h.inside(ctx, direct, members(kids, name), st.Czxid)
			if err != nil || len(in) > 0 {
				return in, 0, err
			}
		}
		if check {
			return nil, st.Czxid, nil
		}
		if err := h.conn.Delete(ctx, ready, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return nil, 0, err
		}
		stale = 0
	}
}

// direct makes f once, for requests made inside another's retry.
func direct(ctx context.Context, _ string, f func(context.Context) error) error { return f(ctx) }

// ignoreNoNode is err, nil when it says the node is not there.
func ignoreNoNode(err error) error {
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// retry makes f until it does not fail with the connection, waiting for
// the session to come back in between: the same session, or
// ErrSessionLost (nothing of ours is made on another session).
func retry(ctx context.Context, conn zk.Conn, f func(ctx context.Context) error) error {
	session := conn.SessionID()
	for {
		err := f(ctx)
		if !errors.Is(err, zk.ErrConnectionLoss) {
			if errors.Is(err, zk.ErrSessionExpired) {
				return ErrSessionLost
			}
			return err
		}
		if err := awaitConnected(ctx, conn); err != nil {
			return err
		}
		if conn.SessionID() != session {
			return ErrSessionLost
		}
	}
}

// awaitConnected waits until conn has a session again after a connection
// loss. ErrSessionLost when the session ended meanwhile, ErrClosed when
// the connection was closed.
func awaitConnected(ctx context.Context, conn zk.Conn) error {
	changed := make(chan struct{}, 1)
	cancel := conn.Subscribe(func(zk.SessionEvent) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer cancel()
	for {
		switch conn.State() {
		case zk.StateConnected, zk.StateReconnected:
			return nil
		case zk.StateLost:
			return ErrSessionLost
		case zk.StateClosed:
			return ErrClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
