package runtime

import (
	"context"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// EnsurePath is zk.EnsurePath made by a command's Exec: each create (the
// path, and each missing parent) is a request of the command, in its own
// CLIENT span from op, where no_node (a parent to make first) and
// node_exists (made already) are steps, not failures.
func EnsurePath(ctx context.Context, conn zk.Conn, op Op, path string, mode zk.CreateMode) error {
	return zk.EnsurePath(Expect(ctx, zk.ErrNoNode, zk.ErrNodeExists), opConn{conn, op}, path, mode)
}

// opConn makes each create a request of a command (Op).
type opConn struct {
	zk.Conn
	op Op
}

func (c opConn) Create(ctx context.Context, path string, data []byte, mode zk.CreateMode) (made string, err error) {
	c.op(ctx, "create", func(ctx context.Context) error {
		SetNode(ctx, path)
		made, err = c.Conn.Create(ctx, path, data, mode)
		return err
	})
	return made, err
}
