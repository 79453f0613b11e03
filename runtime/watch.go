package runtime

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// WatchDeletion watches node, which a recipe expects to exist, for its
// deletion: exists reports whether it is there, and if it is, w fires when
// it is deleted (or its data set). A node found gone leaves no watch: it
// is a get, not an exists, whose watch on a missing node would wait for a
// creation that may never come (go-zookeeper cannot remove a watch; it and
// the adapter would keep one, and a goroutine, until the session ends).
func WatchDeletion(ctx context.Context, conn zk.Conn, node string) (exists bool, w <-chan zk.WatchEvent, err error) {
	_, _, w, err = conn.GetW(ctx, node)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return false, nil, nil
	case err != nil:
		return false, nil, err
	}
	return true, w, nil
}
