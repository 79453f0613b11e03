package group

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// exec makes one command's requests off the actor and posts the reply
// (and a watch's event) back as inputs.
func (m *Member) exec(sh *runtime.Shell[input, command], cmd command, op runtime.Op) {
	conn := m.conn
	sh.Go(func(ctx context.Context) (input, bool) {
		switch c := cmd.(type) {
		case create:
			return m.create(ctx, op, c), true
		case setData:
			r := written{Cmd: c.Cmd}
			op(runtime.Expect(ctx, zk.ErrNoNode), "set", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				var st zk.Stat
				st, r.Err = conn.Set(ctx, c.Path, c.Data, zk.AnyVersion)
				r.Version = st.Version
				return r.Err
			})
			return r, true
		case remove:
			r := deleted{Cmd: c.Cmd}
			op(runtime.Expect(ctx, zk.ErrNoNode, zk.ErrBadVersion), "delete", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				r.Err = conn.Delete(ctx, c.Path, c.Version)
				return r.Err
			})
			return r, true
		case watchNode:
			r := watched{Cmd: c.Cmd}
			var w <-chan zk.WatchEvent
			op(runtime.Expect(ctx, zk.ErrNoNode), "get", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				var st zk.Stat
				_, st, w, r.Err = conn.GetW(ctx, c.Path)
				r.Exists, r.Owner = r.Err == nil, st.EphemeralOwner
				if errors.Is(r.Err, zk.ErrNoNode) {
					r.Err = nil
				}
				return r.Err
			})
			if w == nil {
				return r, true
			}
			sh.Post(ctx, r, true)
			select {
			case ev, ok := <-w:
				if !ok {
					ev.Type = zk.EventNotWatching
				}
				return fired{Cmd: c.Cmd, Type: ev.Type}, true
			case <-ctx.Done():
				return nil, false
			}
		}
		return nil, false
	})
}

// create makes our node (and the group's missing parents, as
// containers); when it is there it reads its owner, data and version. A
// node that goes between the create and the read is made again.
func (m *Member) create(ctx context.Context, op runtime.Op, c create) created {
	conn := m.conn
	r := created{Cmd: c.Cmd}
	for range 3 {
		op(runtime.Expect(ctx, zk.ErrNoNode, zk.ErrNodeExists), "create", func(ctx context.Context) error {
			runtime.SetNode(ctx, c.Path)
			_, r.Err = conn.Create(ctx, c.Path, c.Data, zk.ModeEphemeral)
			return r.Err
		})
		if errors.Is(r.Err, zk.ErrNoNode) {
			r.Err = runtime.EnsurePath(ctx, conn, op, zk.Parent(c.Path), zk.ModeContainer)
			if r.Err == nil {
				continue
			}
		}
		if !errors.Is(r.Err, zk.ErrNodeExists) {
			return r
		}
		var st zk.Stat
		var err error
		op(runtime.Expect(ctx, zk.ErrNoNode), "get", func(ctx context.Context) error {
			runtime.SetNode(ctx, c.Path)
			r.Data, st, err = conn.Get(ctx, c.Path)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone meanwhile: make it
		}
		if err != nil {
			r.Err = err
			return r
		}
		r.Owner, r.Version = st.EphemeralOwner, st.Version
		return r
	}
	return r
}
