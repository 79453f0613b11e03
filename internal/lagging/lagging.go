// Package lagging wraps a zk.Conn to act like a client that, after a lost
// reply, reads from a server behind the one its write went to.
//
// In an ensemble, a write whose reply was lost may be committed and still
// not applied on the server the client reconnects to: reads there miss it
// for a while, and a sync makes that server catch up. ZooKeeper's own
// servers do this for a few milliseconds at most, too rarely to hit on
// purpose. The simulator has it as a fault (Sim.LateNextWrite, which the
// property and chaos tests inject at random); Conn makes it happen on any
// target, a real server included, in a test that asks for it:
// the write it is told to lose is not sent, answers ErrConnectionLoss,
// and is made for real before the connection's next write or Sync (a
// session's requests are applied in order), or once a read of one of its
// paths (or of their parent) has answered, whichever is first. Code that
// syncs before looking for its write finds it; code that reads first
// misses it and sees it appear afterwards.
package lagging

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Conn is a zk.Conn that loses the writes LoseNext names (see the package
// doc). Every other call goes to the wrapped Conn unchanged.
type Conn struct {
	zk.Conn

	mu      sync.Mutex
	armed   []*Write
	pending []*Write
}

// Wrap returns a Conn over c.
func Wrap(c zk.Conn) *Conn { return &Conn{Conn: c} }

// Op names the kind of write LoseNext loses.
type Op string

// The writes LoseNext can lose.
const (
	OpCreate Op = "create"
	OpDelete Op = "delete"
	OpMulti  Op = "multi"
)

// Write is a write LoseNext is to lose.
type Write struct {
	op      Op
	prefix  string
	paths   []string // the write's own paths, once lost
	late    bool     // made only before the next write (see LandLate)
	apply   func() error
	lost    chan struct{}
	applied chan struct{}
	err     error
}

// Lost is closed once the write answered ErrConnectionLoss unsent.
func (w *Write) Lost() <-chan struct{} { return w.lost }

// Applied is closed once the write was made for real; Err is then its
// result.
func (w *Write) Applied() <-chan struct{} { return w.applied }

// Err is the result of the write made late (valid once Applied is closed).
func (w *Write) Err() error { return w.err }

// LoseNext loses the next write of kind op to a path under prefix (for a
// multi: any of its ops' paths).
func (c *Conn) LoseNext(op Op, prefix string) *Write {
	w := &Write{op: op, prefix: prefix, lost: make(chan struct{}), applied: make(chan struct{})}
	c.mu.Lock()
	c.armed = append(c.armed, w)
	c.mu.Unlock()
	return w
}

// LandLate loses the next write of kind op like LoseNext, but makes it
// only just before the connection's next write: syncs and reads before
// that do not see it, as if the server applied the request after them (a
// request it read late from a connection the client had left: see package
// chaos). Code that looks for its write after a lost reply, finds it not
// made and makes it again, sees its second write miss.
func (c *Conn) LandLate(op Op, prefix string) *Write {
	w := c.LoseNext(op, prefix)
	c.mu.Lock()
	w.late = true
	c.mu.Unlock()
	return w
}

// lose reports whether a write of kind op on paths is to be lost; if so
// it keeps apply to make it later.
func (c *Conn) lose(op Op, apply func() error, paths ...string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range c.armed {
		if w.op != op || !anyUnder(paths, w.prefix) {
			continue
		}
		c.armed = append(c.armed[:i], c.armed[i+1:]...)
		w.apply, w.paths = apply, paths
		c.pending = append(c.pending, w)
		close(w.lost)
		return true
	}
	return false
}

func anyUnder(paths []string, prefix string) bool {
	for _, p := range paths {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// catchUp makes the lost writes a read of path would miss (all of them
// for ""), in order; those that land late (LandLate) only before a write.
func (c *Conn) catchUp(path string, write bool) {
	c.mu.Lock()
	var due []*Write
	c.pending = slices.DeleteFunc(c.pending, func(w *Write) bool {
		if w.late && !write || path != "" && !slices.ContainsFunc(w.paths, func(p string) bool { return p == path || zk.Parent(p) == path }) {
			return false
		}
		due = append(due, w)
		return true
	})
	c.mu.Unlock()
	for _, w := range due {
		w.err = w.apply()
		close(w.applied)
	}
}

// Create loses the create when one is armed for it; the lost writes
// before it are made first.
func (c *Conn) Create(ctx context.Context, path string, data []byte, mode zk.CreateMode) (string, error) {
	return c.CreateACL(ctx, path, data, mode, nil)
}

// CreateACL is Create with an ACL.
func (c *Conn) CreateACL(ctx context.Context, path string, data []byte, mode zk.CreateMode, acl []zk.ACL) (string, error) {
	c.catchUp("", true)
	apply := func() error {
		_, err := c.Conn.CreateACL(context.WithoutCancel(ctx), path, data, mode, acl)
		return err
	}
	if c.lose(OpCreate, apply, path) {
		return "", zk.ErrConnectionLoss
	}
	return c.Conn.CreateACL(ctx, path, data, mode, acl)
}

// Delete loses the delete when one is armed for it; the lost writes
// before it are made first.
func (c *Conn) Delete(ctx context.Context, path string, version int32) error {
	c.catchUp("", true)
	apply := func() error { return c.Conn.Delete(context.WithoutCancel(ctx), path, version) }
	if c.lose(OpDelete, apply, path) {
		return zk.ErrConnectionLoss
	}
	return c.Conn.Delete(ctx, path, version)
}

// Multi loses the multi when one is armed for any of its ops' paths; the
// lost writes before it are made first.
func (c *Conn) Multi(ctx context.Context, ops ...zk.Op) ([]zk.OpResult, error) {
	c.catchUp("", true)
	var paths []string
	for _, op := range ops {
		if p, ok := zk.OpPath(op); ok {
			paths = append(paths, p)
		}
	}
	apply := func() error { _, err := c.Conn.Multi(context.WithoutCancel(ctx), ops...); return err }
	if c.lose(OpMulti, apply, paths...) {
		return nil, zk.ErrConnectionLoss
	}
	return c.Conn.Multi(ctx, ops...)
}

// Set makes the lost writes first.
func (c *Conn) Set(ctx context.Context, path string, data []byte, version int32) (zk.Stat, error) {
	c.catchUp("", true)
	return c.Conn.Set(ctx, path, data, version)
}

// Sync makes the lost writes first, as a server catching up would.
func (c *Conn) Sync(ctx context.Context, path string) error {
	c.catchUp("", false)
	return c.Conn.Sync(ctx, path)
}

// Exists answers from before the lost writes on path, then makes them.
func (c *Conn) Exists(ctx context.Context, path string) (zk.Stat, bool, error) {
	defer c.catchUp(path, false)
	return c.Conn.Exists(ctx, path)
}

// ExistsW answers from before the lost writes, then makes them.
func (c *Conn) ExistsW(ctx context.Context, path string) (zk.Stat, bool, <-chan zk.WatchEvent, error) {
	defer c.catchUp(path, false)
	return c.Conn.ExistsW(ctx, path)
}

// Get answers from before the lost writes, then makes them.
func (c *Conn) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	defer c.catchUp(path, false)
	return c.Conn.Get(ctx, path)
}

// GetW answers from before the lost writes, then makes them.
func (c *Conn) GetW(ctx context.Context, path string) ([]byte, zk.Stat, <-chan zk.WatchEvent, error) {
	defer c.catchUp(path, false)
	return c.Conn.GetW(ctx, path)
}

// Children answers from before the lost writes, then makes them.
func (c *Conn) Children(ctx context.Context, path string) ([]string, zk.Stat, error) {
	defer c.catchUp(path, false)
	return c.Conn.Children(ctx, path)
}

// ChildrenW answers from before the lost writes, then makes them.
func (c *Conn) ChildrenW(ctx context.Context, path string) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	defer c.catchUp(path, false)
	return c.Conn.ChildrenW(ctx, path)
}
