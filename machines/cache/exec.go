package cache

import (
	"context"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// exec makes one command's request off the actor and posts its reply,
// then, when it left a watch, the watch's event.
func (h *handle) exec(sh *runtime.Shell[input, command], cmd command, op runtime.Op) {
	conn := h.conn
	sh.Go(func(ctx context.Context) (input, bool) {
		var w <-chan zk.WatchEvent
		var r input
		var path string
		switch c := cmd.(type) {
		case readData:
			path = c.Path
			d := dataRead{Cmd: c.Cmd}
			op(runtime.Expect(ctx, zk.ErrNoNode), "get", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				d.Data, d.Stat, w, d.Err = conn.GetW(ctx, c.Path)
				return d.Err
			})
			r = d
		case readKids:
			path = c.Path
			k := kidsRead{Cmd: c.Cmd}
			op(runtime.Expect(ctx, zk.ErrNoNode), "children", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				k.Names, k.Stat, w, k.Err = conn.ChildrenW(ctx, c.Path)
				return k.Err
			})
			r = k
		case watchExists:
			path = c.Path
			x := existsRead{Cmd: c.Cmd}
			op(ctx, "exists", func(ctx context.Context) error {
				runtime.SetNode(ctx, c.Path)
				_, x.Exists, w, x.Err = conn.ExistsW(ctx, c.Path)
				return x.Err
			})
			if x.Exists {
				w = nil // a data watch, not followed: the root is read next, with its own
			}
			r = x
		}
		if w == nil {
			return r, true
		}
		sh.Post(ctx, r, true)
		select {
		case ev, ok := <-w:
			if !ok {
				ev.Type = zk.EventNotWatching
			}
			return fired{Cmd: cmd.ID(), Path: path, Type: ev.Type}, true
		case <-ctx.Done():
			return nil, false
		}
	})
}
