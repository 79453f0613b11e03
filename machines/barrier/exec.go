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

// exec makes one command's requests off the actor and posts their replies
// (and a watch's event) back as inputs. A request that fails with the
// connection is made again once the session is back (every request here
// is safe to repeat: our member node has one name, and a create that finds
// it made, or a delete that finds it gone, is what was wanted); when the
// session ended instead, it fails with ErrSessionLost.
func (d *DoubleBarrier) exec(sh *runtime.Shell[input, command], cmd command, op runtime.Op) {
	conn, path := d.conn, d.path
	ready := zk.Join(path, ReadyName)
	do := func(ctx context.Context, name string, f func(ctx context.Context) error) error {
		return retry(ctx, conn, func(ctx context.Context) error {
			var err error
			op(ctx, name, func(ctx context.Context) error { err = f(ctx); return err })
			return err
		})
	}
	switch c := cmd.(type) {
	case probe:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := probed{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			var wg sync.WaitGroup
			var errData, errKids error
			// Three reads at once: one round trip.
			wg.Go(func() {
				errData = do(ctx, "get", func(ctx context.Context) (err error) {
					r.PathData, _, err = conn.Get(ctx, path)
					if errors.Is(err, zk.ErrNoNode) {
						return nil
					}
					return err
				})
			})
			wg.Go(func() {
				errKids = do(ctx, "children", func(ctx context.Context) (err error) {
					r.Children, _, err = conn.Children(ctx, path)
					if errors.Is(err, zk.ErrNoNode) {
						return nil
					}
					return err
				})
			})
			r.Err = do(ctx, "exists", func(ctx context.Context) (err error) {
				var st zk.Stat
				st, r.ReadyExists, w, err = conn.ExistsW(ctx, ready)
				r.ReadyCzxid = st.Czxid
				return err
			})
			wg.Wait()
			r.Err = errors.Join(r.Err, errData, errKids)
			if r.Err == nil && r.ReadyExists {
				r.Inside, r.Err = d.inside(ctx, do, members(r.Children, ""), r.ReadyCzxid)
			}
			if r.Err != nil {
				return r, true
			}
			return postAwait(ctx, sh, r, w, func(t zk.EventType) input { return readyEvent{Cmd: c.Cmd, Type: t} })
		})
	case join:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := joined{Cmd: c.Cmd, Name: c.Name}
			r.Err = do(ctx, "create", func(ctx context.Context) error {
				var err error
				r.ReadyCreated, err = d.join(ctx, c.Name, c.WithReady)
				return err
			})
			if r.Err != nil || r.ReadyCreated {
				return r, true
			}
			r.Err = do(ctx, "children", func(ctx context.Context) (err error) {
				r.Children, _, err = conn.Children(ctx, path)
				return err
			})
			return r, true
		})
	case openReady:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := readyOpened{Cmd: c.Cmd}
			name := "multi"
			if c.Check {
				name = "exists"
			}
			r.Err = do(ctx, name, func(ctx context.Context) (err error) {
				r.InProgress, r.Stale, err = d.openReady(ctx, c.Name, c.Stale, c.Check)
				return err
			})
			if errors.Is(r.Err, errReadyGone) {
				r.Gone, r.Err = true, nil
			}
			return r, true
		})
	case watchReady:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := readyWatched{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			r.Err = do(ctx, "exists", func(ctx context.Context) (err error) {
				var st zk.Stat
				st, r.Exists, w, err = conn.ExistsW(ctx, ready)
				r.Czxid = st.Czxid
				return err
			})
			if r.Err != nil {
				return r, true
			}
			return postAwait(ctx, sh, r, w, func(t zk.EventType) input { return readyEvent{Cmd: c.Cmd, Type: t} })
		})
	case listMembers:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := leaveListed{Cmd: c.Cmd}
			if c.Sync {
				if r.Err = do(ctx, "sync", func(ctx context.Context) error { return conn.Sync(ctx, path) }); r.Err != nil {
					return r, true
				}
			}
			r.Err = do(ctx, "children", func(ctx context.Context) (err error) {
				r.Children, _, err = conn.Children(ctx, path)
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return err
			})
			return r, true
		})
	case deleteMember:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := memberDeleted{Cmd: c.Cmd, Name: c.Name}
			r.Err = do(ctx, "delete", func(ctx context.Context) error { return deleteIfThere(ctx, conn, zk.Join(path, c.Name)) })
			return r, true
		})
	case watchMember:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := nodeWatched{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			r.Err = do(ctx, "get", func(ctx context.Context) (err error) {
				r.Exists, w, err = runtime.WatchDeletion(ctx, conn, zk.Join(path, c.Name))
				return err
			})
			if r.Err != nil || !r.Exists {
				return r, true
			}
			// deleted, or the watch ended: list again either way
			return postAwait(ctx, sh, r, w, func(zk.EventType) input { return nodeGone{Cmd: c.Cmd} })
		})
	case deleteReady:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := readyDeleted{Cmd: c.Cmd}
			r.Err = do(ctx, "delete", func(ctx context.Context) error { return deleteIfThere(ctx, conn, ready) })
			return r, true
		})
	default:
		panic(fmt.Sprintf("barrier: unknown command %T", cmd))
	}
}

// postAwait posts reply r, then waits for its watch w to fire: the input
// is fired's (zk.EventNotWatching when w ends unfired).
func postAwait(ctx context.Context, sh *runtime.Shell[input, command], r input, w <-chan zk.WatchEvent, fired func(zk.EventType) input) (input, bool) {
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
func (d *DoubleBarrier) inside(ctx context.Context, do func(context.Context, string, func(context.Context) error) error, ms []string, readyCzxid int64) ([]string, error) {
	czxids, errs := make([]int64, len(ms)), make([]error, len(ms))
	var wg sync.WaitGroup
	for i, n := range ms {
		wg.Go(func() {
			errs[i] = do(ctx, "exists", func(ctx context.Context) error {
				st, ok, err := d.conn.Exists(ctx, zk.Join(d.path, n))
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
func (d *DoubleBarrier) join(ctx context.Context, name string, withReady bool) (readyCreated bool, err error) {
	ours := zk.Join(d.path, name)
	for attempt := 0; ; attempt++ {
		if withReady {
			_, err = d.conn.Multi(ctx, &zk.CreateOp{Path: ours, Mode: zk.ModeEphemeral},
				&zk.CreateOp{Path: zk.Join(d.path, ReadyName), Mode: zk.ModePersistent})
			if err == nil {
				return true, nil
			}
			if errors.Is(err, zk.ErrNodeExists) {
				withReady = false // ready exists, or our node does: create ours alone
				continue
			}
		} else {
			_, err = d.conn.Create(ctx, ours, nil, zk.ModeEphemeral)
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				return false, nil
			}
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt == 2 {
			return false, err
		}
		if err := d.createPath(ctx); err != nil {
			return false, err
		}
	}
}

// createPath creates the barrier's path, as a container that records the
// member count, and its missing parents.
func (d *DoubleBarrier) createPath(ctx context.Context) error {
	if err := zk.EnsurePath(ctx, d.conn, zk.Parent(d.path), zk.ModeContainer); err != nil {
		return err
	}
	_, err := d.conn.Create(ctx, d.path, []byte(strconv.Itoa(d.members)), zk.ModeContainer)
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
func (d *DoubleBarrier) openReady(ctx context.Context, name string, stale int64, check bool) (inProgress []string, staleCzxid int64, err error) {
	ready, ours := zk.Join(d.path, ReadyName), zk.Join(d.path, name)
	for {
		if !check {
			_, err := d.conn.Multi(ctx, &zk.CheckOp{Path: ours, Version: zk.AnyVersion},
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
		wg.Go(func() { ourStat, ourOK, ourErr = d.conn.Exists(ctx, ours) })
		st, readyOK, readyErr = d.conn.Exists(ctx, ready)
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
			kids, _, err := d.conn.Children(ctx, d.path)
			if err != nil {
				return nil, 0, err
			}
			in, err := d.inside(ctx, direct, members(kids, name), st.Czxid)
			if err != nil || len(in) > 0 {
				return in, 0, err
			}
		}
		if check {
			return nil, st.Czxid, nil
		}
		if err := d.conn.Delete(ctx, ready, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return nil, 0, err
		}
		stale = 0
	}
}

// direct makes f once, for requests made inside another's retry.
func direct(ctx context.Context, _ string, f func(context.Context) error) error { return f(ctx) }

func deleteIfThere(ctx context.Context, conn zk.Conn, path string) error {
	err := conn.Delete(ctx, path, zk.AnyVersion)
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
