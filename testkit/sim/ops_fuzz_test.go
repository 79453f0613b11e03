package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/internal/opstream"
)

// FuzzOps decodes any bytes into a stream of operations on three sessions
// (creates, deletes, sets, reads and multis with their modes and versions,
// cuts and expiries; testkit/internal/opstream) and applies it to the
// simulator. After each operation the tree must hold the invariants — no
// child without its parent, no child of an ephemeral, every ephemeral
// owned by a live session, zxids in order — and the operation must have
// done exactly what a small model of ZooKeeper, kept beside it, says:
// the same error, the same name (sequence numbers increasing per parent,
// written %010d, across the wrap: seqStart sets the counter of the root of
// the stream), versions bumped by one, a failed write or multi leaving
// nothing behind (all or nothing), one zxid per write, an expiry taking its
// session's ephemerals. testkit's TestOpStreams runs the same streams on a
// real server and expects the simulator's results.
func FuzzOps(f *testing.F) {
	for _, seed := range opstream.Seeds() {
		f.Add(opstream.Encode(seed), int32(0))
	}
	f.Add(opstream.Encode(opstream.Seeds()[0]), int32(2147483646))
	f.Add(opstream.Encode(opstream.Seeds()[1]), int32(-1))
	f.Fuzz(func(t *testing.T, stream []byte, seqStart int32) {
		runOps(t, opstream.Decode(stream), seqStart)
	})
}

// simEnv runs a stream on a Sim's conns.
type simEnv struct {
	s     *Sim
	conns []zk.Conn
}

func (e simEnv) Conn(i int) zk.Conn { return e.conns[i] }
func (e simEnv) Bounce(i int)       { e.s.Disconnect(e.conns[i]); e.s.Reconnect(e.conns[i]) }
func (e simEnv) Expire(i int)       { e.s.Expire(e.conns[i]) }

func runOps(t *testing.T, ops []opstream.Op, seqStart int32) {
	s := New()
	defer s.Close()
	env := simEnv{s: s}
	for range opstream.Sessions {
		env.conns = append(env.conns, s.Connect())
	}
	ctx := t.Context()
	r, err := opstream.Start(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetSequence(opstream.Root, seqStart); err != nil {
		t.Fatal(err)
	}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nafter:\n  %s", fmt.Sprintf(format, args...), strings.Join(log, "\n  "))
	}
	lastSeq := map[string]int32{} // parent path@czxid: the last sequence it gave
	for _, op := range ops {
		before := snapshot(s)
		m := before.clone()
		sessions := sessionIDs(env.conns)
		want := m.apply(r, op, sessions)
		res := r.Do(ctx, op)
		log = append(log, res.Line)
		after := snapshot(s)
		if msg := after.invariants(sessionIDs(env.conns)); msg != "" {
			fail("invariant broken: %s", msg)
		}
		if got := errName(res.Err); got != want.err {
			fail("%s: error %s, the model says %s", op, got, want.err)
		}
		if res.Name != want.name {
			fail("%s: created %q, the model says %q", op, res.Name, want.name)
		}
		if want.zxids >= 0 && after.zxid != before.zxid+int64(want.zxids) {
			fail("%s: took %d zxids, the model says %d", op, after.zxid-before.zxid, want.zxids)
		}
		m.zxid = after.zxid
		if diff := m.diff(after); diff != "" {
			fail("%s: the tree is not the model's:\n%s", op, diff)
		}
		for _, created := range want.seqs {
			name := created[0]
			parent := zk.Parent(name)
			key := fmt.Sprintf("%s@%d", parent, after.nodes[parent].czxid)
			seq := seqOf(t, name, created[1])
			if last, ok := lastSeq[key]; ok && int32(uint32(seq)-uint32(last)) <= 0 {
				fail("%s: sequence %d under %s after %d", op, seq, parent, last)
			}
			lastSeq[key] = seq
		}
	}
}

// seqOf reads the sequence suffix after prefix in a sequential node's
// name: %010d of an int32, eleven characters when negative.
func seqOf(t *testing.T, name, prefix string) int32 {
	t.Helper()
	suffix, _ := strings.CutPrefix(name, prefix)
	v, err := strconv.ParseInt(suffix, 10, 32)
	if err != nil || fmt.Sprintf("%010d", v) != suffix {
		t.Fatalf("%q has no sequence suffix after %q", name, prefix)
	}
	return int32(v)
}

func sessionIDs(conns []zk.Conn) []int64 {
	ids := make([]int64, len(conns))
	for i, c := range conns {
		ids[i] = c.SessionID()
	}
	return ids
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	for _, k := range []struct {
		err  error
		name string
	}{
		{zk.ErrInvalidPath, "InvalidPath"}, {zk.ErrNoNode, "NoNode"}, {zk.ErrNodeExists, "NodeExists"},
		{zk.ErrNotEmpty, "NotEmpty"}, {zk.ErrBadVersion, "BadVersion"},
		{zk.ErrNoChildrenForEphemerals, "NoChildrenForEphemerals"}, {zk.ErrBadArguments, "BadArguments"},
		{zk.ErrNoAuth, "NoAuth"},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return err.Error()
}

// mnode is a node as the model and the snapshots see it.
type mnode struct {
	data         string
	isNil        bool
	czxid, mzxid int64
	pzxid        int64
	version      int32
	creates      int32
	owner        int64
	kids         map[string]bool
}

// tree is a snapshot of the Sim's tree, or the model's.
type tree struct {
	nodes map[string]*mnode
	zxid  int64
}

func snapshot(s *Sim) *tree {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &tree{nodes: map[string]*mnode{}, zxid: s.zxid}
	for p, n := range s.nodes {
		kids := map[string]bool{}
		for k := range n.children {
			kids[k] = true
		}
		t.nodes[p] = &mnode{data: string(n.data), isNil: n.data == nil, czxid: n.czxid, mzxid: n.mzxid, pzxid: n.pzxid,
			version: n.version, creates: n.childCreates, owner: n.owner, kids: kids}
	}
	return t
}

func (t *tree) clone() *tree {
	c := &tree{nodes: map[string]*mnode{}, zxid: t.zxid}
	for p, n := range t.nodes {
		m := *n
		m.kids = maps.Clone(n.kids)
		c.nodes[p] = &m
	}
	return c
}

// invariants returns what is wrong with the tree, or "".
func (t *tree) invariants(live []int64) string {
	for _, p := range slices.Sorted(maps.Keys(t.nodes)) {
		n := t.nodes[p]
		if p != "/" {
			parent := t.nodes[zk.Parent(p)]
			if parent == nil {
				return fmt.Sprintf("%s has no parent", p)
			}
			if !parent.kids[zk.Base(p)] {
				return fmt.Sprintf("%s is not among its parent's children", p)
			}
		}
		for k := range n.kids {
			if t.nodes[zk.Join(p, k)] == nil {
				return fmt.Sprintf("%s lists a child %s that does not exist", p, k)
			}
		}
		if n.owner != 0 {
			if len(n.kids) > 0 {
				return fmt.Sprintf("ephemeral %s has children", p)
			}
			if !slices.Contains(live, n.owner) {
				return fmt.Sprintf("ephemeral %s outlived its session %#x", p, n.owner)
			}
		}
		if n.czxid > n.mzxid || n.czxid > n.pzxid || n.mzxid > t.zxid || n.pzxid > t.zxid {
			return fmt.Sprintf("%s: zxids c%d m%d p%d, last %d", p, n.czxid, n.mzxid, n.pzxid, t.zxid)
		}
	}
	return ""
}

// diff lists how u differs from t, or "".
func (t *tree) diff(u *tree) string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(t.nodes)) {
		a, b := t.nodes[p], u.nodes[p]
		switch {
		case b == nil:
			out = append(out, "  missing "+p)
		case a.data != b.data || a.isNil != b.isNil || a.czxid != b.czxid || a.mzxid != b.mzxid || a.pzxid != b.pzxid ||
			a.version != b.version || a.creates != b.creates || a.owner != b.owner || !maps.Equal(a.kids, b.kids):
			out = append(out, fmt.Sprintf("  %s: model %+v, sim %+v", p, *a, *b))
		}
	}
	for p := range u.nodes {
		if t.nodes[p] == nil {
			out = append(out, "  extra "+p)
		}
	}
	return strings.Join(out, "\n")
}

// outcome is what the model says an op does.
type outcome struct {
	err   string
	name  string      // the created node, for a create
	zxids int         // how many zxids it takes; -1: not checked
	seqs  [][2]string // the sequential nodes it created, and their prefixes
}

// apply runs op on the model, in the order and with the checks of
// ZooKeeper's PrepRequestProcessor.
func (t *tree) apply(r *opstream.Runner, op opstream.Op, sessions []int64) outcome {
	session := sessions[op.Session]
	path := r.Resolve(op)
	switch op.Kind {
	case opstream.Get, opstream.Children, opstream.Exists:
		switch {
		case zk.ValidatePath(path) != nil:
			return outcome{err: "InvalidPath"}
		case t.nodes[path] == nil && op.Kind != opstream.Exists:
			return outcome{err: "NoNode"}
		}
		return outcome{err: "ok"}
	case opstream.Bounce:
		return outcome{err: "ok"}
	case opstream.Expire:
		t.zxid++
		for _, p := range slices.Sorted(maps.Keys(t.nodes)) {
			if t.nodes[p].owner == session {
				t.remove(p)
			}
		}
		t.zxid++ // the new session
		return outcome{err: "ok", zxids: 2}
	case opstream.Multi:
		for _, sub := range op.Ops {
			p := r.Resolve(sub)
			if zk.ValidatePath(p) != nil {
				return outcome{err: "InvalidPath"}
			}
		}
		t.zxid++
		trial := t.clone()
		var o outcome
		for _, sub := range op.Ops {
			so := trial.write(r.Resolve(sub), sub, session)
			if so.err != "ok" {
				return outcome{err: so.err, zxids: 1}
			}
			o.seqs = append(o.seqs, so.seqs...)
		}
		*t = *trial
		o.err, o.zxids = "ok", 1
		return o
	default:
		if zk.ValidatePath(path) != nil {
			return outcome{err: "InvalidPath"}
		}
		t.zxid++
		trial := t.clone()
		o := trial.write(path, op, session)
		if o.err == "ok" {
			*t = *trial
		}
		o.zxids = 1
		return o
	}
}

// write applies one write at zxid t.zxid, changing t even when it fails
// (the caller throws a failed trial away).
func (t *tree) write(path string, op opstream.Op, session int64) outcome {
	n := t.nodes[path]
	switch op.Kind {
	case opstream.Create:
		parent := t.nodes[zk.Parent(path)]
		if parent == nil {
			return outcome{err: "NoNode"}
		}
		name := path
		if op.Mode.Sequential() {
			name = fmt.Sprintf("%s%010d", path, parent.creates)
		}
		if t.nodes[name] != nil {
			return outcome{err: "NodeExists"}
		}
		if parent.owner != 0 {
			return outcome{err: "NoChildrenForEphemerals"}
		}
		nn := &mnode{data: string(op.Data), isNil: op.Data == nil, czxid: t.zxid, mzxid: t.zxid, pzxid: t.zxid, kids: map[string]bool{}}
		if op.Mode.Ephemeral() {
			nn.owner = session
		}
		t.nodes[name] = nn
		parent.kids[zk.Base(name)] = true
		parent.creates++
		parent.pzxid = t.zxid
		o := outcome{err: "ok", name: name}
		if op.Mode.Sequential() {
			o.seqs = [][2]string{{name, path}}
		}
		return o
	case opstream.Delete:
		switch {
		case path == "/" || path == "/zookeeper" || path == "/zookeeper/config" || path == "/zookeeper/quota":
			return outcome{err: "BadArguments"}
		case n == nil:
			return outcome{err: "NoNode"}
		case op.Version != zk.AnyVersion && op.Version != n.version:
			return outcome{err: "BadVersion"}
		case len(n.kids) > 0:
			return outcome{err: "NotEmpty"}
		}
		t.remove(path)
	case opstream.Set:
		switch {
		case n == nil:
			return outcome{err: "NoNode"}
		case path == "/zookeeper/config":
			return outcome{err: "NoAuth"}
		case op.Version != zk.AnyVersion && op.Version != n.version:
			return outcome{err: "BadVersion"}
		}
		n.data, n.isNil = string(op.Data), op.Data == nil
		n.mzxid = t.zxid
		n.version++
	case opstream.Check:
		switch {
		case n == nil:
			return outcome{err: "NoNode"}
		case op.Version != zk.AnyVersion && op.Version != n.version:
			return outcome{err: "BadVersion"}
		}
	}
	return outcome{err: "ok"}
}

func (t *tree) remove(path string) {
	parent := t.nodes[zk.Parent(path)]
	delete(t.nodes, path)
	delete(parent.kids, zk.Base(path))
	parent.pzxid = t.zxid
}
