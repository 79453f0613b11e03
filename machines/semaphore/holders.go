package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/contention"
)

// Holder is one current holder of a lease.
type Holder struct {
	Node  string // the full path of its lease node
	ID    string // the node's data: WithID of our handles; Curator writes its own
	Token int64  // the node's czxid: the holder's fencing token
}

// Holders returns the current holders of the semaphore at path, in queue
// order: the first maxLeases lease nodes (ours and Curator's alike), with
// maxLeases read from the path's data. Waiters are not holders. Nothing
// is created; a path that does not exist has no holders. It is one look:
// a holder may have gone, and a waiter taken its place, by the time it
// returns. Errors: zk.ErrInvalidPath for a bad path, ErrClosed for a nil
// or closed connection, ErrMaxLeasesUnknown when the path records no
// maxLeases (only Curator has used it).
func Holders(ctx context.Context, conn zk.Conn, path string) ([]Holder, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, fmt.Errorf("semaphore: %w", err)
	}
	if path == "/" {
		return nil, fmt.Errorf("semaphore: %w %q: the root cannot be a semaphore", zk.ErrInvalidPath, path)
	}
	if conn == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrClosed)
	}
	closed := func(err error) error {
		if errors.Is(err, zk.ErrClosed) {
			return fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return err
	}
	data, _, err := conn.Get(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, closed(err)
	}
	max, err := strconv.Atoi(string(data))
	if err != nil || max < 1 {
		return nil, fmt.Errorf("%w: %s records %q", ErrMaxLeasesUnknown, path, data)
	}
	kids, _, err := conn.Children(ctx, LeasesDir(path))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, closed(err)
	}
	names := contention.Contenders(kids, []string{Marker})
	if len(names) > max {
		names = names[:max]
	}
	var hs []Holder
	for _, name := range names {
		node := zk.Join(LeasesDir(path), name)
		data, st, err := conn.Get(ctx, node)
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, closed(err)
		}
		hs = append(hs, Holder{Node: node, ID: string(data), Token: st.Czxid})
	}
	return hs, nil
}
