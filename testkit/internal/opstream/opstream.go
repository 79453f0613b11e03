// Package opstream decodes bytes into a stream of ZooKeeper operations —
// creates, deletes, sets, reads, multis, with flags and versions, and
// session events — and runs a stream on a few sessions, writing down each
// result in a form that does not depend on the server: error kinds,
// created names, Stat fields with zxids made relative and session ids named
// by the session that owns them.
//
// It is the shared part of the simulator's fuzz target (testkit/sim), which
// checks the simulator's invariants after each operation, and of the test
// that runs the same streams on the simulator and on a real server
// (testkit) and expects the same results: a difference is a bug in one of
// them. It imports no testing package.
package opstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Sessions is how many sessions a stream runs on.
const Sessions = 3

// Root is the node every stream works under; Run creates it first.
const Root = "/t"

// Kind is what an Op does.
type Kind uint8

// The kinds of operation.
const (
	Create Kind = iota
	Delete
	Set
	Get
	Children
	Exists
	Multi
	Check  // only inside a Multi
	Bounce // the session's connection is cut and comes back (same session)
	Expire // the session expires; its conn gets a new one
	nKinds
)

var kindNames = [...]string{"create", "delete", "set", "get", "children", "exists", "multi", "check", "bounce", "expire"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Op is one operation of a stream.
type Op struct {
	Kind    Kind
	Session int    // which session runs it, 0 ≤ Session < Sessions
	Path    string // a fixed path; see Ref
	Ref     int    // ≥ 0: instead of Path, the Ref-th (mod count) name a sequential create returned so far, if any
	Data    []byte
	Mode    zk.CreateMode
	Version int32 // zk.AnyVersion or a small version
	Ops     []Op  // a Multi's ops: Create, Delete, Set, Check
}

func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "s%d %s", o.Session, o.Kind)
	switch o.Kind {
	case Bounce, Expire:
		return b.String()
	case Multi:
		b.WriteString(" [")
		for i, sub := range o.Ops {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(strings.TrimPrefix(sub.String(), fmt.Sprintf("s%d ", sub.Session)))
		}
		b.WriteString("]")
		return b.String()
	}
	if o.Ref >= 0 {
		fmt.Fprintf(&b, " seq#%d(or %s)", o.Ref, o.Path)
	} else {
		fmt.Fprintf(&b, " %s", o.Path)
	}
	switch o.Kind {
	case Create:
		fmt.Fprintf(&b, " %s %q", o.Mode, o.Data)
	case Set:
		fmt.Fprintf(&b, " %q v%d", o.Data, o.Version)
	case Delete, Check:
		fmt.Fprintf(&b, " v%d", o.Version)
	}
	return b.String()
}

// paths are the fixed paths a stream uses: nodes under Root at three
// depths, sequential prefixes, and a few the server treats specially.
var paths = []string{
	Root, Root + "/a", Root + "/b", Root + "/a/c", Root + "/b/c", Root + "/a/c/d",
	Root + "/a", Root + "/b", Root + "/s-", Root + "/a/s-", Root + "/a/c/s-", Root + "/a/",
	"/", "/zookeeper", "/zookeeper/config", Root + "/b/c",
}

// maxOps bounds a stream, and maxMulti a multi, so that a run stays short.
const (
	maxOps   = 64
	maxMulti = 4
)

// reader hands out the bytes of a stream; past the end it gives zeros.
type reader struct{ b []byte }

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) more() bool { return len(r.b) > 0 }

// Decode turns any bytes into a stream: each op takes a kind byte (with the
// session in its top bits) and then what the kind needs. It never fails;
// the same bytes always give the same stream.
func Decode(b []byte) []Op {
	r := &reader{b: b}
	var ops []Op
	for r.more() && len(ops) < maxOps {
		c := r.byte()
		kind := Kind(c&0x0f) % nKinds
		if kind == Check {
			kind = Exists
		}
		sess := int(c>>4) % Sessions
		var op Op
		if kind == Multi {
			op = Op{Kind: Multi, Session: sess, Ref: -1}
			n := int(r.byte())%maxMulti + 1
			for range n {
				sub := []Kind{Create, Delete, Set, Check}[r.byte()%4]
				op.Ops = append(op.Ops, decodeOp(r, sub, sess))
			}
		} else {
			op = decodeOp(r, kind, sess)
		}
		ops = append(ops, op)
	}
	return ops
}

func decodeOp(r *reader, kind Kind, sess int) Op {
	op := Op{Kind: kind, Session: sess, Ref: -1}
	if kind == Bounce || kind == Expire {
		return op
	}
	p := r.byte()
	op.Path = paths[int(p&0x0f)]
	if p&0x10 != 0 {
		op.Ref = int(p >> 5)
	}
	// Nothing changes outside Root but what the server refuses: what is
	// there is the server's history (the root's sequence counter, its and
	// /zookeeper's versions), which would make the same stream give other
	// results on another server, or a second time on the same one.
	outside := op.Path == "/" || op.Path == "/zookeeper"
	switch kind {
	case Create:
		m := r.byte()
		op.Mode = zk.CreateMode(m % 4)
		if op.Mode.Sequential() && (outside || zk.Parent(op.Path) == "/" || zk.Parent(op.Path) == "/zookeeper") {
			op.Mode -= zk.ModePersistentSequential
		}
		op.Data = data(r, m>>2)
	case Set:
		v := r.byte()
		op.Version = version(v)
		op.Data = data(r, v>>3)
		if outside {
			op.Path = "/zookeeper/config" // refused: no auth
		}
	case Delete, Check:
		op.Version = version(r.byte())
	}
	return op
}

// version: AnyVersion for half the values, else 0..3.
func version(v byte) int32 {
	if v&0x04 != 0 {
		return zk.AnyVersion
	}
	return int32(v & 0x03)
}

// data: nil, empty, or up to three bytes.
func data(r *reader, sel byte) []byte {
	switch n := int(sel % 5); n {
	case 0:
		return nil
	case 1:
		return []byte{}
	default:
		d := make([]byte, n-1)
		for i := range d {
			d[i] = r.byte()
		}
		return d
	}
}

// Encode is Decode's inverse for streams Decode can give: the bytes of ops.
// It is how seed streams are written by hand. A Ref or Path it cannot
// express panics: a bug in the seed.
func Encode(ops []Op) []byte {
	var b []byte
	for _, op := range ops {
		b = append(b, byte(op.Session)<<4|byte(op.Kind))
		if op.Kind == Multi {
			b = append(b, byte(len(op.Ops)-1))
			for _, sub := range op.Ops {
				b = append(b, byte(slices.Index([]Kind{Create, Delete, Set, Check}, sub.Kind)))
				b = encodeOp(b, sub)
			}
			continue
		}
		b = encodeOp(b, op)
	}
	return b
}

func encodeOp(b []byte, op Op) []byte {
	if op.Kind == Bounce || op.Kind == Expire {
		return b
	}
	i := slices.Index(paths, op.Path)
	if i < 0 {
		panic(fmt.Sprintf("opstream: no path %q", op.Path))
	}
	p := byte(i)
	if op.Ref >= 0 {
		p |= 0x10 | byte(op.Ref)<<5
	}
	b = append(b, p)
	ver := func(v int32) byte {
		if v == zk.AnyVersion {
			return 0x04
		}
		return byte(v & 3)
	}
	sel := func() byte {
		if op.Data == nil {
			return 0
		}
		return byte(len(op.Data) + 1)
	}
	switch op.Kind {
	case Create:
		b = append(b, byte(op.Mode)|sel()<<2)
		b = append(b, op.Data...)
	case Set:
		b = append(b, ver(op.Version)|sel()<<3)
		b = append(b, op.Data...)
	case Delete, Check:
		b = append(b, ver(op.Version))
	}
	return b
}

// Env is what a stream runs on: its sessions and the session verbs. Bounce
// and Expire return once the conn is connected again (Expire: on a new
// session).
type Env interface {
	Conn(i int) zk.Conn
	Bounce(i int)
	Expire(i int)
}

// Result is one op's outcome, written down independently of the server.
type Result struct {
	Op   Op
	Err  error  // the op's error as returned
	Line string // the normalized outcome
	Name string // the created node's path, for a successful create
}

// Runner runs a stream, resolving sequence references and normalizing
// results. Base is the czxid of Root, which zxids are reported relative to.
type Runner struct {
	Env     Env
	Base    int64
	Created []string // names that sequential creates returned, in order
}

// Start creates Root, persistent, on session 0 and returns a Runner.
func Start(ctx context.Context, env Env) (*Runner, error) {
	c := env.Conn(0)
	if _, err := c.Create(ctx, Root, nil, zk.ModePersistent); err != nil {
		return nil, err
	}
	st, _, err := c.Exists(ctx, Root)
	if err != nil {
		return nil, err
	}
	return &Runner{Env: env, Base: st.Czxid}, nil
}

// Resolve returns the path op works on.
func (r *Runner) Resolve(op Op) string {
	if op.Ref >= 0 && len(r.Created) > 0 {
		return r.Created[op.Ref%len(r.Created)]
	}
	return op.Path
}

// zkOp makes a Multi's op.
func (r *Runner) zkOp(op Op) zk.Op {
	p := r.Resolve(op)
	switch op.Kind {
	case Create:
		return &zk.CreateOp{Path: p, Data: op.Data, Mode: op.Mode}
	case Delete:
		return &zk.DeleteOp{Path: p, Version: op.Version}
	case Set:
		return &zk.SetOp{Path: p, Data: op.Data, Version: op.Version}
	default:
		return &zk.CheckOp{Path: p, Version: op.Version}
	}
}

// Do runs one op and returns its result.
func (r *Runner) Do(ctx context.Context, op Op) Result {
	res := Result{Op: op}
	c := r.Env.Conn(op.Session)
	p := r.Resolve(op)
	var line string
	switch op.Kind {
	case Create:
		name, err := c.Create(ctx, p, op.Data, op.Mode)
		res.Err = err
		if err == nil {
			res.Name = name
			if op.Mode.Sequential() {
				r.Created = append(r.Created, name)
			}
		}
		line = fmt.Sprintf("%s %s", name, r.errKind(err))
	case Delete:
		res.Err = c.Delete(ctx, p, op.Version)
		line = r.errKind(res.Err)
	case Set:
		st, err := c.Set(ctx, p, op.Data, op.Version)
		res.Err = err
		line = r.stat(st) + " " + r.errKind(err)
	case Get:
		d, st, err := c.Get(ctx, p)
		res.Err = err
		line = fmt.Sprintf("%q %s %s", d, r.stat(st), r.errKind(err))
		if outside(p) {
			line = r.errKind(err)
		}
	case Children:
		kids, st, err := c.Children(ctx, p)
		res.Err = err
		kids = slices.Clone(kids)
		slices.Sort(kids)
		line = fmt.Sprintf("%v %s %s", kids, r.stat(st), r.errKind(err))
		if outside(p) {
			line = r.errKind(err)
		}
	case Exists:
		st, ok, err := c.Exists(ctx, p)
		res.Err = err
		line = fmt.Sprintf("%t %s %s", ok, r.stat(st), r.errKind(err))
		if outside(p) {
			line = fmt.Sprintf("%t %s", ok, r.errKind(err))
		}
	case Multi:
		zops := make([]zk.Op, len(op.Ops))
		for i, sub := range op.Ops {
			zops[i] = r.zkOp(sub)
		}
		out, err := c.Multi(ctx, zops...)
		res.Err = err
		var parts []string
		for i, o := range out {
			if cr, ok := zops[i].(*zk.CreateOp); ok && err == nil && cr.Mode.Sequential() {
				r.Created = append(r.Created, o.Path)
			}
			parts = append(parts, fmt.Sprintf("%s %s %s", o.Path, r.stat(o.Stat), r.errKind(o.Err)))
		}
		line = fmt.Sprintf("[%s] %s", strings.Join(parts, "; "), r.errKind(err))
	case Bounce:
		r.Env.Bounce(op.Session)
		line = "ok"
	case Expire:
		r.Env.Expire(op.Session)
		line = "ok"
	}
	res.Line = fmt.Sprintf("%s => %s", op, line)
	return res
}

// outside reports whether p is outside Root (/, /zookeeper and its
// children): a read there is written down as its error only, since the
// data, Stat and children there are the server's history (other tests on a
// shared server write /zookeeper; every stream leaves a trace in /'s
// counters).
func outside(p string) bool { return p != Root && !strings.HasPrefix(p, Root+"/") }

// stat writes st with zxids relative to Base, times left out, and the
// ephemeral owner as the session that owns it now ("s1"), or "gone".
func (r *Runner) stat(st zk.Stat) string {
	rel := func(z int64) int64 {
		if z == 0 {
			return 0
		}
		return z - r.Base
	}
	owner := "-"
	if st.EphemeralOwner != 0 {
		owner = "gone"
		for i := range Sessions {
			if r.Env.Conn(i).SessionID() == st.EphemeralOwner {
				owner = fmt.Sprintf("s%d", i)
			}
		}
	}
	return fmt.Sprintf("{c%d m%d p%d v%d cv%d own=%s len%d n%d}",
		rel(st.Czxid), rel(st.Mzxid), rel(st.Pzxid), st.Version, st.Cversion, owner, st.DataLength, st.NumChildren)
}

// errKinds are the errors a result names; any other error is a bug in the
// stream's runner or the server.
var errKinds = []struct {
	err  error
	name string
}{
	{zk.ErrInvalidPath, "InvalidPath"}, {zk.ErrNoNode, "NoNode"}, {zk.ErrNodeExists, "NodeExists"},
	{zk.ErrNotEmpty, "NotEmpty"}, {zk.ErrBadVersion, "BadVersion"},
	{zk.ErrNoChildrenForEphemerals, "NoChildrenForEphemerals"}, {zk.ErrBadArguments, "BadArguments"},
	{zk.ErrNoAuth, "NoAuth"}, {zk.ErrRuntimeInconsistency, "RuntimeInconsistency"},
	{zk.ErrConnectionLoss, "ConnectionLoss"}, {zk.ErrSessionExpired, "SessionExpired"}, {zk.ErrClosed, "Closed"},
}

func (r *Runner) errKind(err error) string {
	if err == nil {
		return "ok"
	}
	for _, k := range errKinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return fmt.Sprintf("other(%v)", err)
}

// Seeds are hand-written streams, one per behaviour: sequences, versions,
// ephemerals and sessions, multi, what the server refuses.
func Seeds() [][]Op {
	const root = Root
	op := func(sess int, k Kind, path string, mode zk.CreateMode, ver int32, data []byte) Op {
		return Op{Kind: k, Session: sess, Path: path, Ref: -1, Mode: mode, Version: ver, Data: data}
	}
	create := func(sess int, path string, mode zk.CreateMode, data []byte) Op {
		return op(sess, Create, path, mode, 0, data)
	}
	ref := func(o Op, r int) Op { o.Ref = r; return o }
	multi := func(sess int, ops ...Op) Op {
		return Op{Kind: Multi, Session: sess, Ref: -1, Ops: ops}
	}
	any := zk.AnyVersion
	return [][]Op{
		{ // sequences under one parent, mixed with plain creates; deletes do not reset
			create(0, root+"/s-", zk.ModePersistentSequential, nil),
			create(1, root+"/a", zk.ModePersistent, []byte("x")),
			create(2, root+"/s-", zk.ModeEphemeralSequential, []byte{}),
			ref(op(0, Delete, root, 0, any, nil), 0),
			create(0, root+"/s-", zk.ModePersistentSequential, nil),
			op(0, Children, root, 0, 0, nil),
			op(1, Get, root, 0, 0, nil),
		},
		{ // versions: set, conditional set and delete
			create(0, root+"/a", zk.ModePersistent, nil),
			op(1, Set, root+"/a", 0, 0, []byte("1")),
			op(1, Set, root+"/a", 0, 0, []byte("2")),
			op(2, Set, root+"/a", 0, 1, []byte("3")),
			op(0, Delete, root+"/a", 0, 0, nil),
			op(0, Delete, root+"/a", 0, 2, nil),
			op(0, Exists, root+"/a", 0, 0, nil),
		},
		{ // ephemerals: no children, gone with their session
			create(1, root+"/a", zk.ModeEphemeral, []byte("e")),
			create(0, root+"/a/c", zk.ModePersistent, nil),
			create(1, root+"/b", zk.ModePersistent, nil),
			create(1, root+"/b/c", zk.ModeEphemeral, nil),
			op(1, Expire, "", 0, 0, nil),
			op(0, Exists, root+"/a", 0, 0, nil),
			op(2, Children, root+"/b", 0, 0, nil),
			create(1, root+"/a", zk.ModeEphemeral, nil),
			op(1, Bounce, "", 0, 0, nil),
			op(2, Get, root+"/a", 0, 0, nil),
		},
		{ // multi: all or nothing, later ops see earlier ones
			multi(0,
				create(0, root+"/a", zk.ModePersistent, nil),
				create(0, root+"/a/s-", zk.ModePersistentSequential, nil),
				op(0, Set, root+"/a", 0, 0, []byte("m")),
				op(0, Check, root+"/a", 0, 1, nil)),
			multi(1,
				create(1, root+"/b", zk.ModePersistent, nil),
				op(1, Delete, root+"/a", 0, any, nil)),
			op(2, Exists, root+"/b", 0, 0, nil),
			multi(2,
				op(2, Check, root+"/a", 0, 7, nil),
				create(2, root+"/b", zk.ModePersistent, nil)),
			op(2, Children, root+"/a", 0, 0, nil),
		},
		{ // what the server refuses: the root, built-ins, bad paths
			op(0, Delete, "/", 0, any, nil),
			op(0, Delete, "/zookeeper", 0, any, nil),
			op(1, Set, "/zookeeper/config", 0, any, []byte("x")),
			create(2, root+"/a/", zk.ModePersistent, nil),
			op(2, Get, "/zookeeper", 0, 0, nil),
			op(0, Exists, "/", 0, 0, nil),
		},
	}
}
