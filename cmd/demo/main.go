// Command demo is a tour of zkrecipes; `go run ./cmd/demo -h` says what it
// shows. In short: workers contending on a lock, participants electing a
// leader while the leader resigns and then crashes, readers and writers
// sharing a read/write lock, workers sharing the leases of a semaphore
// while a holder's session ends, consumers acking the items of a work
// queue while one crashes holding an item, workers starting and finishing
// together on a double barrier while one crashes inside, a two-phase
// commit whose coordinator crashes, a lock on a secured ensemble that
// another identity cannot take, and instances of a service that a client
// follows while one's session expires. It prints every lifecycle event as it
// happens, a summary per scenario, and at exit a waterfall of the slowest
// trace of each operation; it can write the whole run as an HTML timeline
// or Chrome Trace JSON, and export its spans to an OpenTelemetry collector.
//
//	go run ./cmd/demo                          # on the embedded simulator
//	go run ./cmd/demo -zk 127.0.0.1:2181       # on a real server or ensemble
//	go run ./cmd/demo -scenario lock -workers 8 -rounds 5
//	go run ./cmd/demo -scenario semaphore      # 8 workers, 3 leases
//	go run ./cmd/demo -scenario queue -orders 20
//	go run ./cmd/demo -scenario barrier
//	go run ./cmd/demo -scenario 2pc
//	go run ./cmd/demo -scenario secure         # digest identities, ACLs, a chroot
//	go run ./cmd/demo -scenario discovery      # 3 instances, one's session expires
//	ZKR_AUTH=digest:me:pw go run ./cmd/demo -zk 127.0.0.1:2281/apps/demo -tls-ca ca.pem
//	go run ./cmd/demo -html /tmp/demo.html     # then open it in a browser, offline
//	go run ./cmd/demo -trace-json /tmp/demo.json # then open it in ui.perfetto.dev
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 go run ./cmd/demo -otlp
//
// Each worker and participant has its own session, as separate processes
// would. The exit code is 0 when every check held (one holder at a time,
// a leader after each change, never more holders than leases and the
// lease of an ended session back, every queue item acked exactly once,
// an expired instance gone from the client's view and back),
// 1 otherwise, 2 on bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkflags"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

const about = `demo: a tour of zkrecipes' ZooKeeper recipes, on an embedded simulated
ZooKeeper (or a real one with -zk). Each scenario runs workers with
sessions of their own, as separate processes would:

  lock       workers take one lock in turn (one holder at a time)
  election   participants elect a leader; the leader resigns, the next one
             crashes (its session expires), and a new leader follows each time
  rwlock     readers share a read/write lock, writers take it alone
  semaphore  8 workers share 3 leases; a holder's session ends, its lease returns
  queue      producers offer orders, consumers take and ack them; one crashes
             holding an item, which is delivered again
  barrier    5 workers start together on a double barrier; one crashes inside,
             the others still leave together
  2pc        a coordinator commits, aborts on a no vote, and crashes mid-way
  secure     alice holds a lock under a chroot; bob, another digest identity,
             reads who holds it but cannot delete her node nor take the lock
  discovery  3 instances of a service register, a client follows them; one's
             session expires: it leaves the client's view and comes back

It prints one line per lifecycle event, in the order they happened
(time since the start | who | event | the state it left | details; a lock's
events in lock words: ACQUIRED, RELEASED, HELD), a summary per scenario,
and at exit a waterfall of the spans of the slowest call of each kind.
-html writes the run as a timeline page that opens offline (a lane per
worker, states as bars, ZooKeeper requests below, crashes and session
losses marked); -trace-json as Chrome Trace JSON (ui.perfetto.dev);
-otlp sends the spans to an OpenTelemetry collector, configured with the
standard OTEL_EXPORTER_OTLP_* variables (default http://localhost:4318).
-zk takes ZooKeeper's connect string, with a chroot ("h1:p,h2:p/apps/demo"),
-tls-* speak TLS to it, and ZKR_AUTH=scheme:credential in the environment
(digest:user:password) authenticates every session (on the simulator too):
the nodes the scenarios create are then that identity's, world-readable.
Exit status: 0 when every check held, 1 otherwise, 2 on bad flags.

usage: demo [flags]
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the demo with args and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, about)
		fs.PrintDefaults()
	}
	zkf := zkflags.Register(fs, "", "ZooKeeper's connect string host:port[,host:port...][/chroot]; empty: the embedded simulator")
	scenario := fs.String("scenario", "all", "lock, election, rwlock, semaphore, queue, barrier, 2pc, secure, discovery or all")
	workers := fs.Int("workers", 5, "lock: workers contending on one lock")
	rounds := fs.Int("rounds", 3, "lock, semaphore: acquisitions per worker")
	htmlFile := fs.String("html", "", "write the run as an HTML timeline to this file (opens offline in a browser)")
	traceJSON := fs.String("trace-json", "", "write the run's events and spans as Chrome Trace Event JSON to this file (opens in ui.perfetto.dev)")
	otlp := fs.Bool("otlp", false, "export spans to an OpenTelemetry collector over OTLP/HTTP (set by OTEL_EXPORTER_OTLP_ENDPOINT etc.)")
	waterfall := fs.Bool("waterfall", true, "print a waterfall of the slowest call of each kind at exit")
	orders := fs.Int("orders", 6, "queue: items each of the 2 producers offers")
	hold := fs.Duration("hold", 5*time.Millisecond, "lock, semaphore, queue: how long a worker holds the lock or a lease, or works on an item")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *workers < 1 || *rounds < 1 || *orders < 1 || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	settings, err := zkf.Parse(os.Getenv)
	if err == nil && zkf.ZK() == "" && zkf.TLS() {
		err = fmt.Errorf("%w: -tls-* need -zk: the embedded simulator has no TLS", zkflags.ErrUsage)
	}
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 2
	}
	scenarios := map[string]func(context.Context, *cluster, *printer) error{
		"lock": func(ctx context.Context, c *cluster, p *printer) error {
			return lockScenario(ctx, c, p, *workers, *rounds, *hold)
		},
		"election": electionScenario,
		"semaphore": func(ctx context.Context, c *cluster, p *printer) error {
			return semaphoreScenario(ctx, c, p, *rounds, *hold)
		},
		"rwlock": rwlockScenario,
		"queue": func(ctx context.Context, c *cluster, p *printer) error {
			return queueScenario(ctx, c, p, *orders, *hold)
		},
		"barrier":   func(ctx context.Context, c *cluster, p *printer) error { return barrierScenario(ctx, c, p, *hold) },
		"2pc":       twophaseScenario,
		"secure":    secureScenario,
		"discovery": discoveryScenario,
	}
	order := []string{"lock", "election", "semaphore", "rwlock", "queue", "barrier", "2pc", "secure", "discovery"}
	if *scenario != "all" {
		if scenarios[*scenario] == nil {
			fmt.Fprintf(stderr, "demo: unknown scenario %q\n", *scenario)
			fs.Usage()
			return 2
		}
		order = []string{*scenario}
	}

	c := newCluster(settings, zkf.ZK())
	p := newPrinter(stdout)

	// Every recipe's spans go to the printer's TraceFile (and a collector
	// with -otlp), through the global provider the recipes default to.
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithSyncer(p.tf)}
	if *otlp {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "demo: -otlp:", err)
			return 1
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)

	p.key()
	for _, name := range order {
		if err = scenarios[name](ctx, c, p); err != nil {
			break
		}
	}
	p.flush()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if serr := tp.Shutdown(sctx); serr != nil { // sends what -otlp still holds
		err = errors.Join(err, fmt.Errorf("spans: %w", serr))
	}
	if *waterfall {
		writeWaterfall(stdout, p.tf.Spans(), 12)
	}
	if *htmlFile != "" {
		err = errors.Join(err, writeFile(*htmlFile, p.tf.WriteHTML))
	}
	if *traceJSON != "" {
		err = errors.Join(err, writeFile(*traceJSON, p.tf.WriteChromeTrace))
	}
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

// writeFile creates file and writes it with write.
func writeFile(file string, write func(io.Writer) error) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cluster is where the demo runs: the simulator or real servers, and how
// every session is opened there.
type cluster struct {
	sim      *sim.Sim
	settings zkflags.Settings // servers, chroot, TLS, ZKR_AUTH
	where    string
}

// newCluster is the simulator when addr (-zk) is empty, else the servers
// of settings.
func newCluster(settings zkflags.Settings, addr string) *cluster {
	c := &cluster{settings: settings, where: "ZooKeeper " + addr}
	if addr == "" {
		c.sim, c.where = sim.New(), "the embedded simulator"
	}
	if who := settings.Describe(); who != "" {
		c.where += " as " + who
	}
	return c
}

// connect opens a new session with the -zk chroot, -tls-* and ZKR_AUTH.
func (c *cluster) connect(ctx context.Context) (zk.Conn, error) {
	return c.dial(ctx, c.settings.Options()...)
}

// dial opens a new session with opts: on the simulator through zk.Wrap
// (which leaves TLS aside), else with zk.Connect.
func (c *cluster) dial(ctx context.Context, opts ...zk.Option) (zk.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if c.sim != nil {
		raw := c.sim.Connect()
		if len(opts) == 0 {
			return raw, nil
		}
		conn, err := zk.Wrap(ctx, raw, opts...)
		if err != nil {
			raw.Close()
		}
		return conn, err
	}
	return zk.Connect(ctx, c.settings.Servers, append([]zk.Option{zk.WithSessionTimeout(4 * time.Second)}, opts...)...)
}

// crash ends conn's session without its owner resigning or releasing
// anything: the simulator expires it, as the server does when a process
// stops answering; on a real server the connection is closed, and the
// server deletes the session's nodes at once.
func (c *cluster) crash(conn zk.Conn) string {
	if c.sim != nil {
		c.sim.Expire(conn)
		return "its session expired"
	}
	conn.Close()
	return "its connection closed"
}
