package zk

import (
	"context"
	"errors"
)

// EnsurePath creates path with mode, and its missing ancestors as
// containers (persistent nodes where the server has no containers). A node
// that exists is left as it is, whatever its mode. Recipes call it for the
// directories they work in, before their first create there. A create
// refused with ErrNoAuth is ErrNoAuth only if path is missing: the server
// checks the parent's CREATE permission before it looks for the node, so a
// directory an administrator made for us, under a parent we may not write,
// answers a create with ErrNoAuth although it is there.
func EnsurePath(ctx context.Context, conn Conn, path string, mode CreateMode) error {
	if path == "/" {
		return nil
	}
	_, err := conn.Create(ctx, path, nil, mode)
	if errors.Is(err, ErrNoNode) {
		if err = EnsurePath(ctx, conn, Parent(path), ModeContainer); err == nil {
			_, err = conn.Create(ctx, path, nil, mode)
		}
	}
	if errors.Is(err, ErrNoAuth) {
		if _, ok, exErr := conn.Exists(ctx, path); exErr == nil && ok {
			return nil
		}
	}
	if errors.Is(err, ErrNodeExists) {
		return nil
	}
	return err
}
