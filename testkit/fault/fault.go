// Package fault holds what the simulator (testkit/sim) and the proxy
// (testkit/proxy) share for their reply faults: the request kinds a fault
// can match, and Reply, the handle of one armed fault, which says whether
// it fired and lets a test disarm it or release a held reply. It imports no
// testing package, so programs can use both.
package fault

import (
	"strings"
	"sync"
)

// OpKind names a kind of ZooKeeper request, for the reply faults.
type OpKind string

// Request kinds a reply fault can match.
const (
	OpCreate   OpKind = "create"
	OpDelete   OpKind = "delete"
	OpExists   OpKind = "exists"
	OpGet      OpKind = "get"
	OpChildren OpKind = "children"
	OpSet      OpKind = "set"
	OpMulti    OpKind = "multi"
)

// Write reports whether a request of kind op writes (create, delete, set,
// multi); the others read. A sync has no kind: it does neither.
func (op OpKind) Write() bool {
	return op == OpCreate || op == OpDelete || op == OpSet || op == OpMulti
}

// Reply is one armed one-shot fault on the reply to a request: lost
// (LoseNextReply) or held back (HoldNextReply). It is armed until a request
// matches it or Disarm or Release disarms it, whichever comes first; a
// matched fault has fired once the server applied the request. Its methods
// are safe to call from any goroutine.
type Reply struct {
	op     OpKind
	prefix string
	hold   bool
	late   bool

	fired       chan struct{} // closed once a matching request was applied
	release     chan struct{} // closed by Release
	onRelease   func()        // the owner's part of Release, run once
	releaseOnce sync.Once

	mu    sync.Mutex
	state replyState
}

type replyState int

const (
	armed    replyState = iota
	matched             // a request took the fault
	disarmed            // Disarm or Release came first
)

// New returns an armed fault on the next request of kind op whose path
// starts with prefix; with hold, the reply is held back until Release,
// otherwise it is lost. onRelease, if not nil, runs once, on the first
// Release (whether or not the fault matched), before Released closes. New
// is for the simulator and the proxy, which own the matching.
func New(op OpKind, prefix string, hold bool, onRelease func()) *Reply {
	return &Reply{op: op, prefix: prefix, hold: hold, fired: make(chan struct{}), release: make(chan struct{}), onRelease: onRelease}
}

// NewLate returns an armed fault on the next write of kind op whose path
// starts with prefix that is lost and applied later (the simulator's
// LateNextWrite): Fired closes once it is applied.
func NewLate(op OpKind, prefix string) *Reply {
	f := New(op, prefix, false, nil)
	f.late = true
	return f
}

// Hold reports whether the fault holds the reply back (HoldNextReply)
// rather than losing it.
func (f *Reply) Hold() bool { return f.hold }

// Late reports whether the request is applied later, not at once (see
// NewLate).
func (f *Reply) Late() bool { return f.late }

// Matches reports whether a request of kind op on paths (a multi has one
// per op) is one the fault is for: of its kind, with a path that starts with
// its prefix. It does not take the fault.
func (f *Reply) Matches(op OpKind, paths ...string) bool {
	if f.op != op {
		return false
	}
	for _, p := range paths {
		if strings.HasPrefix(p, f.prefix) {
			return true
		}
	}
	return false
}

// Take claims the fault for a request: it reports true once, for the first
// request that takes it while it is armed, and false if it was disarmed (the
// owner then drops it from its list).
func (f *Reply) Take() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state != armed {
		return false
	}
	f.state = matched
	return true
}

// MarkFired records that the request that took the fault was applied by
// the server: Fired closes.
func (f *Reply) MarkFired() { close(f.fired) }

// Released is closed by Release: the owner stops holding the reply then.
func (f *Reply) Released() <-chan struct{} { return f.release }

// Fired is closed once a request matched the fault and the server applied
// it; its reply is then lost or held. If the connection dropped after the
// request matched and before its reply came, Fired never closes (whether
// the server applied it is then unknown, as for any request in flight).
func (f *Reply) Fired() <-chan struct{} { return f.fired }

// Disarm disarms the fault if no request has matched it yet, and reports
// whether it did. false means it was no longer armed: a request took it
// (Fired tells whether it was applied), or it was disarmed already.
// Disarming a held fault that fired does not release the reply (Release
// does).
func (f *Reply) Disarm() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state != armed {
		return false
	}
	f.state = disarmed
	return true
}

// Release lets a held reply go, with everything held behind it; before a
// request matched the fault, it disarms it. It is idempotent, and a no-op
// beside disarming for a lost reply.
func (f *Reply) Release() {
	f.releaseOnce.Do(func() {
		f.Disarm()
		if f.onRelease != nil {
			f.onRelease()
		}
		close(f.release)
	})
}
