// Package zkrecipes holds what every recipe shares: the errors a caller
// handles the same way whatever the recipe.
//
// Each recipe package keeps sentinels of its own (lock.ErrSessionLost,
// queue.ErrClosed, ...), and each of them matches the shared one here, so
// one check covers every recipe:
//
//	if errors.Is(err, zkrecipes.ErrSessionLost) { ... } // lock, election, queue, ...
//
// The recipes are in machines/ (lock, rwlock, semaphore, election, queue,
// barrier, twophase), the connection in adapters/zk, the in-memory
// ZooKeeper and fault injection in testkit.
package zkrecipes

import "errors"

// The errors every recipe shares. A recipe's own sentinel of the same name
// wraps the one here: errors.Is(lock.ErrClosed, zkrecipes.ErrClosed) is true.
var (
	// ErrClosed: the handle was closed; every call after Close returns it.
	ErrClosed = errors.New("closed")
	// ErrSessionLost: the ZooKeeper session ended (expired, or replaced
	// by a new one), so whatever it held is gone.
	ErrSessionLost = errors.New("session lost")
	// ErrSuspended: the connection dropped and the session may still be
	// alive; a recipe whose policy counts that as losing its grant ends
	// the grant with it.
	ErrSuspended = errors.New("connection suspended")
	// ErrNodeDeleted: a node the recipe held was deleted by another client.
	ErrNodeDeleted = errors.New("node deleted")
	// ErrInvalidPath: a path was refused before anything was sent.
	ErrInvalidPath = errors.New("invalid path")
	// ErrInvalidOption: an option was out of range, or one the constructor
	// it was given to cannot use.
	ErrInvalidOption = errors.New("invalid option")
	// ErrCleanupPending: Close returned before its deletes were confirmed;
	// the connection's janitor goes on deleting in the background.
	ErrCleanupPending = errors.New("cleanup pending")
)
