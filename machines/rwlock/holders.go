package rwlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/contention"
)

// Holder is a current holder of a read/write lock.
type Holder struct {
	Node  string // the holder's node (full path)
	ID    string // the node's data: its holder's id (ours: the participant's, WithID's)
	Token int64  // the node's czxid: its grant's fencing token
	Write bool   // it holds the write lock
}

// Holders returns who holds the read/write lock at path now, in queue
// order: the writer, or the readers (with a downgrading participant's
// writer among them); waiters are left out, and Curator's nodes count.
// Nothing is created: a missing path has no holders. A holder that lets go
// during the query is left out.
func Holders(ctx context.Context, conn zk.Conn, path string) ([]Holder, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, fmt.Errorf("rwlock: %w", err)
	}
	if conn == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrClosed)
	}
	kids, _, err := conn.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var hs []Holder
	for _, name := range contention.Holding(kids, []string{ReadMarker, WriteMarker}, contention.ReadWrite(ReadMarker)) {
		node := zk.Join(path, name)
		data, st, err := conn.Get(ctx, node)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		write := !strings.HasSuffix(strings.TrimRight(name, "-0123456789"), ReadMarker)
		hs = append(hs, Holder{Node: node, ID: string(data), Token: st.Czxid, Write: write})
	}
	return hs, nil
}
