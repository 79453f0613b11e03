// Package zkserver starts Apache ZooKeeper for programs and tests: a
// standalone Server (Launch) or a 3-server Ensemble (LaunchEnsemble) on
// 127.0.0.1, run from Debian's libzookeeper-java jars with java (install
// them with scripts/install-zookeeper.sh). It links no testing package, so
// a program can use it (zkr server does); testkit's StartServer and
// StartEnsemble are built on it. Servers can also serve a secure client
// port, with keys made at launch (WithTLS), and have a super user
// (WithSuperUser).
package zkserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Option configures the servers Launch and LaunchEnsemble start.
type Option func(*config)

type config struct {
	tick           time.Duration
	maxSession     time.Duration
	containerCheck time.Duration
	forceSync      bool
	heap           string
	startTimeout   time.Duration
	quickJIT       bool
	port           int
	dataDir        string
	tls            bool
	noPlain        bool
	superDigest    string
}

func newConfig(opts []Option) config {
	cfg := config{
		tick:         200 * time.Millisecond,
		maxSession:   60 * time.Second,
		heap:         "128m",
		startTimeout: 60 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// WithTickTime sets ZooKeeper's tickTime. Default 200 ms (ZooKeeper's own
// default is 2 s): the shortest session a client can negotiate is two ticks,
// so tests can use sessions of 1–2 s, and sessions expire on a tick grid, up
// to one tick after their timeout.
func WithTickTime(d time.Duration) Option {
	return func(c *config) { c.tick = d }
}

// WithMaxSessionTimeout sets the longest session timeout the server grants
// (maxSessionTimeout). Default 60 s, whatever the tick (ZooKeeper's own
// default is 20 ticks).
func WithMaxSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.maxSession = d }
}

// WithContainerCheckInterval sets how often the server looks for empty
// container nodes to delete (-Dznode.container.checkIntervalMs). Default:
// ZooKeeper's own, 60 s, so containers are in practice never reaped during a
// test unless this is set.
func WithContainerCheckInterval(d time.Duration) Option {
	return func(c *config) { c.containerCheck = d }
}

// WithForceSync makes the server fsync its transaction log before it
// acknowledges a write, as a production server does. Default off: tests do
// not need durability and fsync makes writes several times slower.
func WithForceSync(on bool) Option {
	return func(c *config) { c.forceSync = on }
}

// WithHeap sets the JVM's maximum heap, in java's -Xmx syntax. Default
// "128m", plenty for tests.
func WithHeap(size string) Option {
	return func(c *config) { c.heap = size }
}

// WithStartTimeout bounds how long starting waits for the server to serve.
// Default 60 s (a server usually serves within a second, but the machine may
// be busy).
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.startTimeout = d }
}

// WithQuickJIT stops the JVM's JIT at its first tier: the server starts
// sooner and burns less CPU compiling, at some cost in peak speed. Default
// off; testkit's servers turn it on.
func WithQuickJIT(on bool) Option {
	return func(c *config) { c.quickJIT = on }
}

// WithPort sets a standalone server's client port. Default: a free port.
// LaunchEnsemble refuses it.
func WithPort(port int) Option {
	return func(c *config) { c.port = port }
}

// WithDataDir keeps a standalone server's config, log and data in dir
// (created if missing) and leaves them there on Close, so a server launched
// again on the same dir has the same nodes. Default: a temporary directory
// that Close removes. LaunchEnsemble refuses it.
func WithDataDir(dir string) Option {
	return func(c *config) { c.dataDir = dir }
}

// Server is a standalone ZooKeeper server, a JVM started by this package on
// 127.0.0.1.
type Server struct {
	proc *zkProcess
	java string
	cfg  config
	once sync.Once // Close's
}

// Launch starts a standalone ZooKeeper server and returns once it serves.
// Close stops it. It returns an error wrapping ErrNotInstalled when java or
// the jars are missing.
func Launch(ctx context.Context, opts ...Option) (*Server, error) {
	cfg := newConfig(opts)
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	dir := cfg.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "zkrecipes-zk-"); err != nil {
			return nil, err
		}
	}
	s := &Server{
		proc: &zkProcess{name: "zookeeper", dir: dir, jvmArgs: jvmArguments(cfg), noPlain: cfg.noPlain},
		java: java, cfg: cfg,
	}
	if cfg.tls {
		for _, jar := range nettyClassPath {
			if _, err := os.Stat(jar); err != nil {
				s.Close()
				return nil, fmt.Errorf("%w: %v", ErrNotInstalled, err)
			}
		}
		if s.proc.tls, err = makeTLS(dir); err != nil {
			s.Close()
			return nil, fmt.Errorf("zkserver: TLS key and certificate: %w", err)
		}
	}
	if err := s.launch(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// launch starts the server, with a new port when the free one picked was
// taken before the JVM could bind it.
func (s *Server) launch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		s.proc.securePort = ports[1]
		port := s.cfg.port
		if port == 0 {
			port = ports[0]
		} else if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			// Another server there would answer our wait for this one.
			return fmt.Errorf("zkserver: port %d: %w", port, err)
		} else {
			l.Close()
		}
		if err := s.proc.writeConfig(s.cfg, port, 0, nil); err != nil {
			return err
		}
		err = s.start(ctx)
		if err == nil || attempt == 3 || s.cfg.port != 0 || !s.proc.bindFailed() {
			return err
		}
	}
}

// Addr is the client address, "127.0.0.1:port", or "" for a server with
// WithTLS(false), which has no plain-text port.
func (s *Server) Addr() string { return s.proc.addr }

// TLSAddr is the secure client address of a server with WithTLS,
// "127.0.0.1:port"; "" without it.
func (s *Server) TLSAddr() string {
	if s.proc.tls == nil {
		return ""
	}
	return s.proc.secureAddr
}

// TLSConfig is a client config trusting the server's CA (RootCAs), or nil
// for a server without WithTLS. The certificate names 127.0.0.1 and
// localhost. Each call returns a new copy.
func (s *Server) TLSConfig() *tls.Config {
	if s.proc.tls == nil {
		return nil
	}
	return s.proc.tls.client.Clone()
}

// TLSServerConfig is a server config that presents the server's own
// certificate (signed by the CA that TLSConfig trusts, for 127.0.0.1 and
// localhost), or nil for a server without WithTLS: a proxy that
// terminates TLS in front of the server (proxy.WithTLS) listens with it,
// and clients given TLSConfig trust it as they trust the server. Each call
// returns a new copy. It holds the server's private key: keep it in the
// test.
func (s *Server) TLSServerConfig() *tls.Config {
	if s.proc.tls == nil {
		return nil
	}
	return s.proc.tls.server.Clone()
}

// Stop kills the server (SIGKILL: clients see the connection drop, as when
// a machine dies) and waits until it is gone. Its data stays, so Start can
// bring the same server back, with its sessions, on the same port.
func (s *Server) Stop() { s.proc.kill() }

// Start starts a stopped server again with its data and port, and returns
// once it serves. Sessions whose timeout has not run out are still valid.
func (s *Server) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.startTimeout)
	defer cancel()
	return s.start(ctx)
}

// start runs the JVM and waits until it serves, or kills it.
func (s *Server) start(ctx context.Context) error {
	if err := s.proc.start(s.java); err != nil {
		return err
	}
	err := s.proc.waitServing(ctx)
	if err != nil {
		s.proc.kill()
	}
	return err
}

// Exited returns a channel closed once the running JVM has exited: killed
// by Stop or Close, or dead by itself.
func (s *Server) Exited() <-chan struct{} { return s.proc.exited() }

// LogTail returns the last n lines of the server's log (stdout and stderr
// of the JVM).
func (s *Server) LogTail(n int) string { return s.proc.logTail(n) }

// Close stops the server and removes its directory, unless it was given
// by WithDataDir. It is idempotent.
func (s *Server) Close() (err error) {
	s.once.Do(func() {
		s.proc.kill()
		if s.cfg.dataDir == "" {
			if err = os.RemoveAll(s.proc.dir); err != nil {
				err = fmt.Errorf("zkserver: remove server data: %w", err)
			}
		}
	})
	return err
}
