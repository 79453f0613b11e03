package sim

import (
	"fmt"
	"slices"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// node is one znode of the simulated tree.
type node struct {
	data         []byte // nil and empty stay distinct, as on the wire
	czxid        int64
	mzxid        int64
	pzxid        int64
	ctime        int64
	mtime        int64
	version      int32
	childCreates int32 // the sequence counter: child creations in this incarnation
	owner        int64 // ephemeral owner session; 0 otherwise
	container    bool
	acl          []zk.ACL // as fixupACL made it at the create
	children     map[string]struct{}
}

// stat reports n as ZooKeeper does: Cversion is derived from the creation
// count (2·creates − children, in int32 arithmetic, like DataNode.copyStat),
// and nothing marks a container.
func (n *node) stat() zk.Stat {
	return zk.Stat{
		Czxid:          n.czxid,
		Mzxid:          n.mzxid,
		Pzxid:          n.pzxid,
		Ctime:          n.ctime,
		Mtime:          n.mtime,
		Version:        n.version,
		Cversion:       2*n.childCreates - int32(len(n.children)),
		EphemeralOwner: n.owner,
		DataLength:     int32(len(n.data)),
		NumChildren:    int32(len(n.children)),
	}
}

// The built-in nodes of every server: they exist from the start, are not
// counted as child creations, cannot be deleted, and anyone may do anything
// with them but /zookeeper/config, which anyone may only read.
const (
	builtinRoot   = "/zookeeper"
	builtinConfig = "/zookeeper/config"
	builtinQuota  = "/zookeeper/quota"
)

func newTree() map[string]*node {
	nodes := map[string]*node{}
	for _, p := range []string{"/", builtinRoot, builtinConfig, builtinQuota} {
		nodes[p] = &node{acl: worldAll, children: map[string]struct{}{}}
		if p == builtinConfig {
			nodes[p].acl = worldRead
		}
		if p != "/" {
			nodes[zk.Parent(p)].children[zk.Base(p)] = struct{}{}
		}
	}
	return nodes
}

// undeletable reports the paths the server refuses to delete (ErrBadArguments).
func undeletable(path string) bool {
	return path == "/" || path == builtinRoot || path == builtinConfig || path == builtinQuota
}

// watchEvent is a node event a transaction fires when it commits.
type watchEvent struct {
	path string
	typ  zk.EventType
}

// txn is one write transaction: every write request, failed or not, a whole
// multi, a closeSession and each container reaping is one, with one zxid.
// Its changes are undone if it fails; its watch events fire only when it
// commits, in the order the changes were made.
type txn struct {
	s      *Sim
	zxid   int64
	now    int64
	undo   []func()
	events []watchEvent
}

func (t *txn) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
}

// create makes path (for the sequential modes, path is a prefix) for who,
// with acl (nil: world:anyone, all), with the checks and in the order of
// ZooKeeper's PrepRequestProcessor: the ACL, missing parent, PermCreate on
// the parent, existing name, ephemeral parent.
func (t *txn) create(path string, data []byte, mode zk.CreateMode, acl []zk.ACL, who principal) (string, error) {
	nodes := t.s.nodes
	acl, err := fixupACL(path, acl, who)
	if err != nil {
		return "", err
	}
	parentPath := zk.Parent(path)
	parent := nodes[parentPath]
	if parent == nil {
		return "", fmt.Errorf("%w: %s", zk.ErrNoNode, parentPath)
	}
	if err := checkPerm(parent, zk.PermCreate, who, parentPath); err != nil {
		return "", err
	}
	name := path
	if mode.Sequential() {
		name = fmt.Sprintf("%s%010d", path, parent.childCreates)
	}
	if nodes[name] != nil {
		return "", fmt.Errorf("%w: %s", zk.ErrNodeExists, name)
	}
	if parent.owner != 0 {
		return "", fmt.Errorf("%w: %s", zk.ErrNoChildrenForEphemerals, parentPath)
	}
	n := &node{
		data:      clone(data),
		czxid:     t.zxid,
		mzxid:     t.zxid,
		pzxid:     t.zxid,
		ctime:     t.now,
		mtime:     t.now,
		container: mode == zk.ModeContainer,
		acl:       acl,
		children:  map[string]struct{}{},
	}
	if mode.Ephemeral() {
		n.owner = who.session
	}
	oldCreates, oldPzxid := parent.childCreates, parent.pzxid
	nodes[name] = n
	parent.children[zk.Base(name)] = struct{}{}
	parent.childCreates++
	parent.pzxid = t.zxid
	t.undo = append(t.undo, func() {
		delete(nodes, name)
		delete(parent.children, zk.Base(name))
		parent.childCreates, parent.pzxid = oldCreates, oldPzxid
	})
	t.events = append(t.events, watchEvent{name, zk.EventNodeCreated}, watchEvent{parentPath, zk.EventNodeChildrenChanged})
	return name, nil
}

// delete removes path for who, checking as the server does PermDelete on
// the parent before the node's existence, and the version before
// emptiness.
func (t *txn) delete(path string, version int32, who principal) error {
	if undeletable(path) {
		return fmt.Errorf("%w: cannot delete %s", zk.ErrBadArguments, path)
	}
	parentPath := zk.Parent(path)
	parent := t.s.nodes[parentPath]
	if parent == nil {
		return fmt.Errorf("%w: %s", zk.ErrNoNode, parentPath)
	}
	if err := checkPerm(parent, zk.PermDelete, who, parentPath); err != nil {
		return err
	}
	n := t.s.nodes[path]
	if n == nil {
		return fmt.Errorf("%w: %s", zk.ErrNoNode, path)
	}
	if version != zk.AnyVersion && version != n.version {
		return fmt.Errorf("%w: %s has version %d, not %d", zk.ErrBadVersion, path, n.version, version)
	}
	if len(n.children) > 0 {
		return fmt.Errorf("%w: %s", zk.ErrNotEmpty, path)
	}
	t.remove(path)
	return nil
}

// remove deletes the childless node at path without any check.
func (t *txn) remove(path string) {
	nodes := t.s.nodes
	n := nodes[path]
	parentPath := zk.Parent(path)
	parent := nodes[parentPath]
	oldPzxid := parent.pzxid
	delete(nodes, path)
	delete(parent.children, zk.Base(path))
	parent.pzxid = t.zxid
	t.undo = append(t.undo, func() {
		nodes[path] = n
		parent.children[zk.Base(path)] = struct{}{}
		parent.pzxid = oldPzxid
	})
	t.events = append(t.events, watchEvent{path, zk.EventNodeDeleted}, watchEvent{parentPath, zk.EventNodeChildrenChanged})
}

// set replaces path's data for who, who needs PermWrite; identical bytes
// count as a change too.
func (t *txn) set(path string, data []byte, version int32, who principal) (zk.Stat, error) {
	n := t.s.nodes[path]
	if n == nil {
		return zk.Stat{}, fmt.Errorf("%w: %s", zk.ErrNoNode, path)
	}
	if err := checkPerm(n, zk.PermWrite, who, path); err != nil {
		return zk.Stat{}, err
	}
	if version != zk.AnyVersion && version != n.version {
		return zk.Stat{}, fmt.Errorf("%w: %s has version %d, not %d", zk.ErrBadVersion, path, n.version, version)
	}
	old := *n
	n.data = clone(data)
	n.mzxid = t.zxid
	n.mtime = t.now
	n.version++
	t.undo = append(t.undo, func() {
		n.data, n.mzxid, n.mtime, n.version = old.data, old.mzxid, old.mtime, old.version
	})
	t.events = append(t.events, watchEvent{path, zk.EventNodeDataChanged})
	return n.stat(), nil
}

// check fails unless path exists with the version (AnyVersion: exists)
// and who may read it.
func (t *txn) check(path string, version int32, who principal) error {
	n := t.s.nodes[path]
	if n == nil {
		return fmt.Errorf("%w: %s", zk.ErrNoNode, path)
	}
	if err := checkPerm(n, zk.PermRead, who, path); err != nil {
		return err
	}
	if version != zk.AnyVersion && version != n.version {
		return fmt.Errorf("%w: %s has version %d, not %d", zk.ErrBadVersion, path, n.version, version)
	}
	return nil
}

// multi applies ops in order for who; on the first failure it reports nil
// for the ops before, the error, and ErrRuntimeInconsistency for the ops
// after.
func (t *txn) multi(ops []zk.Op, who principal) ([]zk.OpResult, error) {
	res := make([]zk.OpResult, len(ops))
	for i, op := range ops {
		var err error
		switch op := op.(type) {
		case *zk.CreateOp:
			res[i].Path, err = t.create(op.Path, op.Data, op.Mode, op.ACL, who)
		case *zk.DeleteOp:
			err = t.delete(op.Path, op.Version, who)
		case *zk.SetOp:
			res[i].Stat, err = t.set(op.Path, op.Data, op.Version, who)
		case *zk.CheckOp:
			err = t.check(op.Path, op.Version, who)
		}
		if err != nil {
			clear(res)
			res[i].Err = err
			for j := i + 1; j < len(res); j++ {
				res[j].Err = zk.ErrRuntimeInconsistency
			}
			return res, err
		}
	}
	return res, nil
}

// ephemerals lists the paths owned by session, sorted.
func (s *Sim) ephemerals(session int64) []string {
	var paths []string
	for p, n := range s.nodes {
		if n.owner == session {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// reapable lists the containers ZooKeeper's ContainerManager would delete
// now: containers that once had a child (the persisted creation count is
// positive) and have none left.
func (s *Sim) reapable() []string {
	var paths []string
	for p, n := range s.nodes {
		if n.container && n.childCreates > 0 && len(n.children) == 0 {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// Request size limits. The server drops the connection, unanswered, on a
// request frame larger than its jute.maxbuffer (default 0xfffff); the
// client refuses to send one that does not fit its 1.5 MiB buffer (with the
// 4-byte length prefix), which the adapter reports as ErrBadArguments.
const (
	maxFrame       = 0xfffff
	maxClientFrame = 1536*1024 - 4
)

// Frame sizes of the requests as go-zookeeper encodes them: the xid and
// opcode, length-prefixed strings and buffers, the ACL (frameACL), flags,
// versions and watch flags.
const (
	frameHeader   = 8
	frameMultiHdr = 4 + 1 + 4
)

func frameString(s string) int { return 4 + len(s) }

func frameCreate(path string, data []byte, acl []zk.ACL) int {
	return frameString(path) + 4 + len(data) + frameACL(acl) + 4
}

func frameSet(path string, data []byte) int { return frameString(path) + 4 + len(data) + 4 }

func frameMulti(ops []zk.Op) int {
	n := frameHeader + frameMultiHdr
	for _, op := range ops {
		n += frameMultiHdr
		switch op := op.(type) {
		case *zk.CreateOp:
			n += frameCreate(op.Path, op.Data, op.ACL)
		case *zk.DeleteOp:
			n += frameString(op.Path) + 4
		case *zk.SetOp:
			n += frameSet(op.Path, op.Data)
		case *zk.CheckOp:
			n += frameString(op.Path) + 4
		}
	}
	return n
}

// validateCreate refuses, before anything is sent, an invalid path or mode.
func validateCreate(path string, mode zk.CreateMode) error {
	if err := zk.ValidatePath(path); err != nil {
		return err
	}
	if mode < zk.ModePersistent || mode > zk.ModeContainer {
		return fmt.Errorf("%w: create mode %d", zk.ErrBadArguments, int(mode))
	}
	return nil
}

// validateOps refuses a multi before anything is sent, as the adapter
// does: a nil or unknown op, an invalid path or mode, or a container create
// (the server applies it but go-zookeeper cannot read the reply).
func validateOps(ops []zk.Op) error {
	for i, op := range ops {
		path, ok := zk.OpPath(op)
		if !ok {
			return fmt.Errorf("%w: op %d: %T", zk.ErrBadArguments, i, op)
		}
		err := zk.ValidatePath(path)
		if c, isCreate := op.(*zk.CreateOp); isCreate && err == nil {
			if c.Mode == zk.ModeContainer {
				err = fmt.Errorf("%w: container create in a multi", zk.ErrBadArguments)
			} else {
				err = validateCreate(path, c.Mode)
			}
		}
		if err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
	}
	return nil
}

// clone copies b, keeping nil and empty distinct.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
