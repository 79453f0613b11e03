package testkit

import (
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/fault"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// Sim is the in-memory ZooKeeper of package testkit/sim (which programs
// import, as it links no testing package), with Target for tests: every
// method of *sim.Sim is promoted, and the embedded field is the simulator
// itself.
type Sim struct{ *sim.Sim }

// NewSim returns an empty simulator, as sim.New does.
func NewSim(opts ...SimOption) *Sim { return &Sim{sim.New(opts...)} }

// SimOption configures a Sim (see sim.Option).
type SimOption = sim.Option

// WithSeed sets the seed of the order in which Children lists names (see
// sim.WithSeed).
func WithSeed(seed int64) SimOption { return sim.WithSeed(seed) }

// WithClock sets the clock for ctime, mtime and event times (see
// sim.WithClock).
func WithClock(now func() time.Time) SimOption { return sim.WithClock(now) }

// WithAutoReap makes the Sim reap containers as soon as a write leaves one
// reapable (see sim.WithAutoReap).
func WithAutoReap() SimOption { return sim.WithAutoReap() }

// OpKind names a kind of ZooKeeper request, for the reply faults.
type OpKind = fault.OpKind

// Request kinds a reply fault can match.
const (
	OpCreate   = fault.OpCreate
	OpDelete   = fault.OpDelete
	OpExists   = fault.OpExists
	OpGet      = fault.OpGet
	OpChildren = fault.OpChildren
	OpSet      = fault.OpSet
	OpMulti    = fault.OpMulti
)

// ReplyFault is one armed LoseNextReply or HoldNextReply: Fired says
// whether it fired, Disarm disarms it, Release lets a held reply go.
type ReplyFault = fault.Reply

// Proxy is the fault-injecting TCP proxy of package testkit/proxy.
type Proxy = proxy.Proxy

// NewProxy starts a Proxy in front of the server at target, as proxy.New
// does (proxy.WithTLS: see NewTLSProxy).
func NewProxy(target string, opts ...proxy.Option) (*Proxy, error) { return proxy.New(target, opts...) }

// EnsembleProxy is one Proxy per member of an ensemble, driven as one (see
// proxy.Ensemble).
type EnsembleProxy = proxy.Ensemble

// NewEnsembleProxy starts one Proxy per member address, as
// proxy.NewEnsemble does.
func NewEnsembleProxy(members []string, opts ...proxy.Option) (*EnsembleProxy, error) {
	return proxy.NewEnsemble(members, opts...)
}
