// Command zkbench measures zkrecipes against a ZooKeeper server and prints
// one JSON line per run, in the shape the peer benchmark programs print
// (Apache Curator's LockBench, RawRtt, ElectionBench, SemaphoreBench,
// QueueBench and BarrierBench, kazoo's,
// go-zookeeper's Lock; those programs are not part of this repository), so
// that lines from one run can be compared side by side:
//
//	zkbench lock -zk 127.0.0.1:2181 -clients 4 -duration 10s -warmup 2s
//	zkbench rtt  -zk 127.0.0.1:2181 -n 1000
//	zkbench election -zk 127.0.0.1:2181 -participants 5 -rounds 20 -kill-rounds 1
//	zkbench rwlock -zk 127.0.0.1:2181 -readers 4 -writers 2 -hold-us 1000
//	zkbench semaphore -zk 127.0.0.1:2181 -clients 8 -leases 2 -hold-us 1000
//	zkbench queue -zk 127.0.0.1:2181 -kind fifo -producers 1 -consumers 1 -items 2000
//	zkbench barrier -zk 127.0.0.1:2181 -members 5 -rounds 20
//	zkbench twophase -zk 127.0.0.1:2181 -participants 5 -txs 200
//	zkbench cache -zk 127.0.0.1:2181 -nodes 10000
//
// Latencies are objects {n, mean_us, p50_us, p90_us, p99_us, max_us} with
// nearest-rank percentiles. -zk takes ZooKeeper's connect string
// host:port[,host:port...][/chroot], or "sim" for the in-memory simulator:
// a smoke test whose figures say nothing about ZooKeeper. -tls-ca,
// -tls-cert and -tls-key speak TLS to the servers, and ZKR_AUTH=
// scheme:credential in the environment authenticates every session, as
// in zkr. The exit code is 1 when the line says "ok": false or on an
// error, 2 on bad connection settings.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkflags"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

const usage = `usage: zkbench BENCH -zk ADDR [flags]

  lock   C clients (one session, one lock handle, one goroutine each) loop
         Acquire/Release on one lock path
  rtt    raw round trips through zkrecipes' ZooKeeper adapter, n sequential
         calls each: exists, get, set, create, getChildren (10 children), delete
  election  participants (one session each) campaign on one path: time to the
         first leader, graceful failovers (resign → next leader), and kill
         rounds (the leader's session lost without a resign)
  rwlock readers and writers (one session, one read/write lock participant and
         one goroutine each) loop Acquire/hold/Release on one path
  semaphore  C clients (one session, one semaphore handle, one goroutine each)
         loop Acquire / hold / Release of one lease of a semaphore of L leases
  queue  producers offer every item, then consumers take them all (-kind fifo,
         ack or priority; -batch N offers N items a multi): offers and takes
         per second, and each beside a raw create and delete in the same run
  barrier  M members (one session each) enter and leave a double barrier,
         R rounds: all at once (the peers' shape), then with the last
         arrival timed beside a create → watch event in the same run
  twophase  a coordinator proposes T transactions in turn to P participants
         voting yes: commit time beside its floor from raw round trips
  cache  a tree cache of N nodes (depth 3, the peers' TreeCacheBench): its
         load, a set → its NODE_UPDATED beside a raw set → watch event,
         requests and memory per node (-members M: group.Watch's too)

  scale  H lock handles (one actor each) on P paths over C connections:
         what an idle handle costs, then all acquire and release once

ADDR is host:port[,host:port...][/chroot] or "sim" (the in-memory simulator);
-tls-ca FILE [-tls-cert FILE -tls-key FILE] for TLS, ZKR_AUTH=scheme:cred in
the environment to authenticate.
"zkbench BENCH -h" lists a bench's flags.
`

// benches maps a bench name to its function. A bench parses its own flags
// and returns its result line.
var benches = map[string]func(ctx context.Context, args []string) (obj, error){
	"lock":      lockBench,
	"rtt":       rttBench,
	"election":  electionBench,
	"rwlock":    rwlockBench,
	"semaphore": semaphoreBench,
	"queue":     queueBench,
	"barrier":   barrierBench,
	"twophase":  twophaseBench,
	"cache":     cacheBench,
	"scale":     scaleBench,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the bench named by args[0] and writes its line to stdout. It
// returns the process's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || benches[args[0]] == nil {
		fmt.Fprint(stderr, usage)
		return 2
	}
	out, err := benches[args[0]](ctx, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "zkbench %s: %v\n", args[0], err)
		if errors.Is(err, zkflags.ErrUsage) {
			return 2
		}
		return 1
	}
	line, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintf(stderr, "zkbench %s: %v\n", args[0], err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", line)
	for _, f := range out {
		if f.k == "ok" && f.v == false {
			return 1
		}
	}
	return 0
}

// common are the flags every bench has.
type common struct {
	fs      *flag.FlagSet
	zk      *zkflags.Flags
	addr    string // -zk
	conn    zkflags.Settings
	session time.Duration
	path    string
	cpuProf string
	profile *os.File // open while a CPU profile is being written
}

func newCommon(bench string) *common {
	c := &common{fs: flag.NewFlagSet("zkbench "+bench, flag.ContinueOnError)}
	c.zk = zkflags.Register(c.fs, "", `ZooKeeper's connect string host:port[,host:port...][/chroot], or "sim" (required)`)
	c.fs.DurationVar(&c.session, "session", 10*time.Second, "session timeout")
	c.fs.StringVar(&c.path, "path", "/zkbench/"+bench+"-"+runID(), "the bench's directory (deleted at the end)")
	c.fs.StringVar(&c.cpuProf, "cpuprofile", "", "write a CPU profile of the whole bench to this file")
	return c
}

// parse parses args and checks -zk.
func (c *common) parse(args []string) error {
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	c.addr = c.zk.ZK()
	if c.addr == "" {
		return errors.New("-zk is required")
	}
	if c.addr == "sim" && c.zk.TLS() {
		return fmt.Errorf("%w: -tls-* with -zk sim: the simulator has no TLS", zkflags.ErrUsage)
	}
	var err error
	if c.conn, err = c.zk.Parse(os.Getenv); err != nil { // "sim" parses as a server name, unused
		return err
	}
	if c.fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", c.fs.Args())
	}
	if c.cpuProf != "" {
		f, err := os.Create(c.cpuProf)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		c.profile = f
	}
	return nil
}

// done ends the CPU profile, if one is being written.
func (c *common) done() {
	if c.profile != nil {
		pprof.StopCPUProfile()
		c.profile.Close()
		c.profile = nil
	}
}

// target is where a bench runs: a ZooKeeper server or ensemble, or the
// simulator, which all connections of one bench share.
type target struct {
	servers []string
	session time.Duration
	opts    []zk.Option // -zk's chroot, -tls-*, ZKR_AUTH
	sim     *sim.Sim
}

func (c *common) target() *target {
	t := &target{servers: c.conn.Servers, session: c.session, opts: c.conn.Options()}
	if c.addr == "sim" {
		t.servers, t.sim = nil, sim.New()
	}
	return t
}

// connect opens a new session.
func (t *target) connect(ctx context.Context) (zk.Conn, error) {
	return t.dial(ctx, t.servers)
}

// dial opens a new session with the target's options on servers, or on
// the simulator through zk.Wrap.
func (t *target) dial(ctx context.Context, servers []string) (zk.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if t.sim != nil {
		raw := t.sim.Connect()
		if len(t.opts) == 0 {
			return raw, nil
		}
		conn, err := zk.Wrap(ctx, raw, t.opts...)
		if err != nil {
			raw.Close()
		}
		return conn, err
	}
	return zk.Connect(ctx, servers, append([]zk.Option{zk.WithSessionTimeout(t.session)}, t.opts...)...)
}

// header is the start of every line: what ran, where, with which settings.
func (c *common) header(bench string, params obj) obj {
	return obj{
		{"bench", bench}, {"impl", "zkrecipes"}, {"impl_version", implVersion()},
		{"go_version", runtime.Version()}, {"connect", c.addr}, {"params", params},
	}
}

// implVersion is the module version the binary was built from (with the
// commit, when built by go build in a checkout), or "(devel)".
func implVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func runID() string { return fmt.Sprintf("%x", time.Now().UnixNano()) }

// deleteTree deletes path and everything below it.
func deleteTree(ctx context.Context, c zk.Conn, path string) error {
	kids, _, err := c.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := deleteTree(ctx, c, path+"/"+k); err != nil {
			return err
		}
	}
	if err := c.Delete(ctx, path, zk.AnyVersion); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}
