package lock

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/contention"
)

// Marker is the node name marker of the lock's nodes, Curator's:
// _c_<uuid>-lock-<seq>.
const Marker = "lock-"

// Holder is the current holder of a lock.
type Holder struct {
	Node  string // the holder's node (full path)
	ID    string // the node's data: its holder's id (ours: WithID's; Curator's: its participant id)
	Token int64  // the node's czxid: its grant's fencing token
}

// Holders returns who holds the lock at path now: one Holder, or none when
// no one does. Waiters are left out, and Curator's nodes count. Nothing is
// created: a missing path has no holders. A holder that lets go during the
// query is left out, and the one after it may hold by the time Holders
// returns. Errors: zk.ErrInvalidPath for a bad path, ErrClosed for a nil or
// closed connection.
func Holders(ctx context.Context, conn zk.Conn, path string) ([]Holder, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if path == "/" {
		return nil, fmt.Errorf("lock: %w %q: the root cannot be a lock", zk.ErrInvalidPath, path)
	}
	if conn == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrClosed)
	}
	kids, _, err := conn.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, closedErr(err)
	}
	var hs []Holder
	for _, name := range contention.Holding(kids, []string{Marker}, contention.Exclusive()) {
		node := zk.Join(path, name)
		data, st, err := conn.Get(ctx, node)
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, closedErr(err)
		}
		hs = append(hs, Holder{Node: node, ID: string(data), Token: st.Czxid})
	}
	return hs, nil
}

// closedErr makes a closed connection's error match ErrClosed too.
func closedErr(err error) error {
	if errors.Is(err, zk.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}
