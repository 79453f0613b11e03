package lock

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// RevokeMessage is what RequestRevoke writes into a holder's node:
// Curator's word (Revoker.attemptRevoke writes it too). A revocable holder
// (WithRevocable) also honours "unlock", the word of ZooKeeper's recipe
// text.
const RevokeMessage = "__REVOKE__"

// RequestRevoke asks the holder of node (a lock node's full path, as
// Grant.Node or Holders show it) to give the lock up, by writing
// RevokeMessage into the node, as Curator's Revoker does: a revocable
// holder of ours (WithRevocable) sees Grant.RevokeRequested close, and a
// Curator InterProcessMutex made revocable gets its revocation listener
// called. Nothing is taken by force: the holder decides. A waiter's node
// may be asked too; it is told when it holds. The nodes of a read/write
// lock are asked the same way.
//
// Errors: zk.ErrInvalidPath for a bad path; ErrClosed for a nil or closed
// connection; when node does not exist (it was released, or never held),
// an error matching both ErrNotHeld and zk.ErrNoNode, and nothing is
// written.
func RequestRevoke(ctx context.Context, conn zk.Conn, node string) error {
	if err := zk.ValidatePath(node); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if node == "/" {
		return fmt.Errorf("lock: %w %q: the root is no lock node", zk.ErrInvalidPath, node)
	}
	if conn == nil {
		return fmt.Errorf("%w: nil connection", ErrClosed)
	}
	_, err := conn.Set(ctx, node, []byte(RevokeMessage), zk.AnyVersion)
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("%w: %s is gone: %w", ErrNotHeld, node, err)
	}
	return closedErr(err)
}
