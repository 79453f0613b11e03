package zk

import (
	"context"
	"errors"
	"fmt"
	"github.com/zkrecipes/zkrecipes"
	"time"
)

// Conn is the narrow view of a ZooKeeper session that recipes use. It is
// implemented here on github.com/go-zookeeper/zk (see Connect) and by the
// in-memory simulator in package testkit/sim.
//
// Every call takes a ctx. When ctx ends before the reply arrives the call
// returns ctx.Err(), but a write may still be applied by the server: callers
// that must know (recipes creating nodes) keep the call running on their own
// context and handle the late reply.
//
// Paths are absolute ZooKeeper paths; Conn validates them (ErrInvalidPath)
// before anything is sent. All methods are safe for concurrent use.
type Conn interface {
	// Create creates path with data. For the sequential modes path is a
	// prefix and the returned name carries the server's 10-digit suffix.
	// ModeContainer falls back to ModePersistent on a server without
	// containers.
	Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error)
	// CreateACL is Create with the node's ACL given; nil means the
	// connection's own (see WithACL).
	CreateACL(ctx context.Context, path string, data []byte, mode CreateMode, acl []ACL) (string, error)
	// Delete deletes path if its version matches (AnyVersion matches all).
	Delete(ctx context.Context, path string, version int32) error
	// Exists reports whether path exists and its Stat (zero when missing).
	Exists(ctx context.Context, path string) (Stat, bool, error)
	// ExistsW is Exists that also leaves a one-shot watch: a data watch if
	// the node exists (fires on change or delete), an existence watch if not
	// (fires on create). The channel receives exactly one WatchEvent and is
	// then closed.
	ExistsW(ctx context.Context, path string) (Stat, bool, <-chan WatchEvent, error)
	// Get returns the node's data and Stat.
	Get(ctx context.Context, path string) ([]byte, Stat, error)
	// GetW is Get with a one-shot data watch (none when the node is missing).
	GetW(ctx context.Context, path string) ([]byte, Stat, <-chan WatchEvent, error)
	// Children returns the child names (unsorted, as the server sends them)
	// and the parent's Stat.
	Children(ctx context.Context, path string) ([]string, Stat, error)
	// ChildrenW is Children with a one-shot child watch (none when missing).
	ChildrenW(ctx context.Context, path string) ([]string, Stat, <-chan WatchEvent, error)
	// Set replaces the node's data if its version matches.
	Set(ctx context.Context, path string, data []byte, version int32) (Stat, error)
	// Multi applies ops atomically: all or none. On failure err is the first
	// failing op's error and no op was applied.
	Multi(ctx context.Context, ops ...Op) ([]OpResult, error)
	// Sync makes the server this session talks to catch up with the leader.
	Sync(ctx context.Context, path string) error

	// SessionID is the id of the session the connection currently has, or 0
	// while it has none.
	SessionID() int64
	// State is the current session state.
	State() SessionState
	// Subscribe calls fn for every session state change from now on, in
	// order, until the returned cancel func is called. fn runs on the
	// connection's own goroutine: it must not block and must not call back
	// into the Conn.
	Subscribe(fn func(SessionEvent)) (cancel func())
	// Close ends the session: the server deletes its ephemeral nodes at once.
	// Later calls do nothing and return nil.
	Close() error
}

// AnyVersion matches every version in Delete, Set and CheckOp.
const AnyVersion int32 = -1

// CreateMode is the kind of node Create makes.
type CreateMode int

// The create modes ZooKeeper offers and recipes use.
const (
	ModePersistent CreateMode = iota
	ModeEphemeral
	ModePersistentSequential
	ModeEphemeralSequential
	// ModeContainer is a persistent node the server deletes once its last
	// child is gone (ZooKeeper 3.5+).
	ModeContainer
)

func (m CreateMode) String() string {
	switch m {
	case ModePersistent:
		return "persistent"
	case ModeEphemeral:
		return "ephemeral"
	case ModePersistentSequential:
		return "persistent-sequential"
	case ModeEphemeralSequential:
		return "ephemeral-sequential"
	case ModeContainer:
		return "container"
	}
	return "invalid"
}

// Sequential reports whether the server appends a sequence suffix.
func (m CreateMode) Sequential() bool {
	return m == ModePersistentSequential || m == ModeEphemeralSequential
}

// Ephemeral reports whether the node lives only as long as its session.
func (m CreateMode) Ephemeral() bool { return m == ModeEphemeral || m == ModeEphemeralSequential }

// Stat is a node's metadata as ZooKeeper reports it.
type Stat struct {
	Czxid          int64 // zxid of the create; recipes use it as the fencing token
	Mzxid          int64 // zxid of the last data change
	Pzxid          int64 // zxid of the last child create or delete
	Ctime          int64 // ms since the epoch
	Mtime          int64 // ms since the epoch
	Version        int32 // number of data changes
	Cversion       int32 // number of child changes (creates + deletes)
	Aversion       int32 // number of ACL changes
	EphemeralOwner int64 // owning session id; 0 for persistent and container nodes
	DataLength     int32
	NumChildren    int32
}

// EventType is the kind of a node watch event.
type EventType int

// Node watch event kinds. EventNotWatching means the watch ended without a
// change: the session expired or the connection was closed (Err says which).
const (
	EventNodeCreated EventType = iota + 1
	EventNodeDeleted
	EventNodeDataChanged
	EventNodeChildrenChanged
	EventNotWatching
)

func (t EventType) String() string {
	switch t {
	case EventNodeCreated:
		return "NodeCreated"
	case EventNodeDeleted:
		return "NodeDeleted"
	case EventNodeDataChanged:
		return "NodeDataChanged"
	case EventNodeChildrenChanged:
		return "NodeChildrenChanged"
	case EventNotWatching:
		return "NotWatching"
	}
	return "Unknown"
}

// WatchEvent is what a one-shot watch delivers.
type WatchEvent struct {
	Type EventType
	Path string
	Err  error // with EventNotWatching: ErrSessionExpired or ErrClosed
}

// SessionState is the state of the connection's session, Curator-style.
type SessionState int

// Session states.
const (
	// StateConnecting: no session yet (before the first handshake).
	StateConnecting SessionState = iota
	// StateConnected: the first session is established.
	StateConnected
	// StateSuspended: the TCP connection is gone; the session may still be
	// alive on the server, so nothing held can be trusted until RECONNECTED.
	StateSuspended
	// StateReconnected: connected again with the same session id; ephemerals
	// and watches survived.
	StateReconnected
	// StateLost: the session expired or was replaced by a new one; every
	// ephemeral and watch of the old session is gone. The connection goes on
	// with a new session (a StateConnected follows once it has one).
	StateLost
	// StateClosed: Close was called; nothing more happens.
	StateClosed
)

func (s SessionState) String() string {
	switch s {
	case StateConnecting:
		return "CONNECTING"
	case StateConnected:
		return "CONNECTED"
	case StateSuspended:
		return "SUSPENDED"
	case StateReconnected:
		return "RECONNECTED"
	case StateLost:
		return "LOST"
	case StateClosed:
		return "CLOSED"
	}
	return "UNKNOWN"
}

// SessionEvent is one session state change.
type SessionEvent struct {
	State     SessionState
	SessionID int64 // the session the state is about (for LOST: the old one)
	Time      time.Time
}

// Op is one operation of a Multi: *CreateOp, *DeleteOp, *SetOp or *CheckOp.
type Op interface{ isOp() }

// CreateOp creates a node inside a Multi. ModeContainer is not allowed in a
// multi (the server applies it, but the reply cannot be read).
type CreateOp struct {
	Path string
	Data []byte
	Mode CreateMode
	ACL  []ACL // nil: the connection's own (see WithACL)
}

// DeleteOp deletes a node inside a Multi.
type DeleteOp struct {
	Path    string
	Version int32
}

// SetOp sets a node's data inside a Multi.
type SetOp struct {
	Path    string
	Data    []byte
	Version int32
}

// CheckOp makes the Multi fail unless the node exists with this version
// (AnyVersion: unless it exists).
type CheckOp struct {
	Path    string
	Version int32
}

// OpPath returns the path op acts on, or false for a nil or unknown op.
func OpPath(op Op) (string, bool) {
	switch op := op.(type) {
	case *CreateOp:
		if op != nil {
			return op.Path, true
		}
	case *DeleteOp:
		if op != nil {
			return op.Path, true
		}
	case *SetOp:
		if op != nil {
			return op.Path, true
		}
	case *CheckOp:
		if op != nil {
			return op.Path, true
		}
	}
	return "", false
}

func (*CreateOp) isOp() {}
func (*DeleteOp) isOp() {}
func (*SetOp) isOp()    {}
func (*CheckOp) isOp()  {}

// OpResult is the result of one op of a successful Multi (Path for creates,
// Stat for sets), or of a failed one (Err).
type OpResult struct {
	Path string
	Stat Stat
	Err  error
}

// Errors. Server errors are mapped to these sentinels; match with errors.Is.
var (
	ErrNoNode                  = errors.New("zk: node does not exist")
	ErrNodeExists              = errors.New("zk: node already exists")
	ErrNotEmpty                = errors.New("zk: node has children")
	ErrBadVersion              = errors.New("zk: version conflict")
	ErrNoChildrenForEphemerals = errors.New("zk: ephemeral nodes may not have children")
	ErrBadArguments            = errors.New("zk: invalid arguments")
	// ErrNoAuth: the node's ACL does not grant this session's identities
	// the permission the request needs.
	ErrNoAuth = errors.New("zk: not authenticated")
	// ErrAuthFailed: the server refused an authentication (an unknown
	// scheme, or credentials its provider rejects) and closed the
	// connection. A wrong digest password is not refused: it is another
	// identity, and the first operation that needs the right one fails with
	// ErrNoAuth.
	ErrAuthFailed           = errors.New("zk: authentication failed")
	ErrUnimplemented        = errors.New("zk: operation not implemented by the server")
	ErrRuntimeInconsistency = errors.New("zk: multi op not applied because an earlier op failed")
	// ErrConnectionLoss: the connection broke while the request was
	// outstanding; the server may or may not have applied it.
	ErrConnectionLoss = errors.New("zk: connection lost, outcome unknown")
	// ErrSessionExpired: the session the request was for is gone.
	ErrSessionExpired = errors.New("zk: session expired")
	// ErrClosed: the Conn was closed (or was nil).
	ErrClosed = errors.New("zk: connection closed")
	// ErrInvalidPath: the path was refused before anything was sent.
	ErrInvalidPath = fmt.Errorf("zk: %w", zkrecipes.ErrInvalidPath)
	// ErrRequestTooLarge: the request does not fit the client's 1.5 MiB
	// send buffer, so it was refused before anything was sent. It is also
	// an ErrBadArguments. (A request that fits the client but exceeds the
	// server's jute.maxbuffer, 1 MiB by default, is sent, and the server
	// drops the connection: ErrConnectionLoss.)
	ErrRequestTooLarge = fmt.Errorf("%w: the request does not fit the client's 1.5 MiB buffer", ErrBadArguments)
	// ErrInvalidOption: an option of Connect or Wrap, or an ACL, was
	// refused before anything was sent (a digest credential that is not
	// "user:password", an ACL entry without permissions, a relative chroot,
	// CreatorAll without WithAuth, a nil TLS config). It matches both
	// ErrBadArguments and zkrecipes.ErrInvalidOption.
	ErrInvalidOption error = invalidOption{}
)

type invalidOption struct{}

func (invalidOption) Error() string { return "zk: invalid option" }

func (invalidOption) Is(target error) bool {
	return target == ErrBadArguments || target == zkrecipes.ErrInvalidOption
}
