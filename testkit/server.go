package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// ServerOption configures the servers StartServer, LaunchServer,
// StartEnsemble and LaunchEnsemble start.
type ServerOption func(*serverConfig)

type serverConfig struct {
	tick           time.Duration
	maxSession     time.Duration
	containerCheck time.Duration
	forceSync      bool
	heap           string
	startTimeout   time.Duration
	// quickJIT stops the JIT at its first tier: the JVM starts sooner and
	// burns less CPU compiling, at some cost in peak speed. Test servers
	// use it; servers for programs (LaunchServer) do not.
	quickJIT bool
}

func newServerConfig(opts []ServerOption) serverConfig {
	cfg := serverConfig{
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
func WithTickTime(d time.Duration) ServerOption {
	return func(c *serverConfig) { c.tick = d }
}

// WithMaxSessionTimeout sets the longest session timeout the server grants
// (maxSessionTimeout). Default 60 s, whatever the tick (ZooKeeper's own
// default is 20 ticks).
func WithMaxSessionTimeout(d time.Duration) ServerOption {
	return func(c *serverConfig) { c.maxSession = d }
}

// WithContainerCheckInterval sets how often the server looks for empty
// container nodes to delete (-Dznode.container.checkIntervalMs). Default:
// ZooKeeper's own, 60 s, so containers are in practice never reaped during a
// test unless this is set.
func WithContainerCheckInterval(d time.Duration) ServerOption {
	return func(c *serverConfig) { c.containerCheck = d }
}

// WithForceSync makes the server fsync its transaction log before it
// acknowledges a write, as a production server does. Default off: tests do
// not need durability and fsync makes writes several times slower.
func WithForceSync(on bool) ServerOption {
	return func(c *serverConfig) { c.forceSync = on }
}

// WithHeap sets the JVM's maximum heap, in java's -Xmx syntax. Default
// "128m", plenty for tests.
func WithHeap(size string) ServerOption {
	return func(c *serverConfig) { c.heap = size }
}

// WithStartTimeout bounds how long starting waits for the server to serve.
// Default 60 s (a server usually serves within a second, but the machine may
// be busy).
func WithStartTimeout(d time.Duration) ServerOption {
	return func(c *serverConfig) { c.startTimeout = d }
}

// Server is a standalone ZooKeeper server, a JVM started by this package on
// 127.0.0.1 with a port of its own and a throw-away data directory.
type Server struct {
	proc    *zkProcess
	java    string
	cfg     serverConfig
	ownDir  bool // Close removes dir
	closeMu sync.Mutex
	closed  bool
}

// StartServer starts a standalone ZooKeeper server for the test and stops it
// when the test ends, printing the tail of its log if the test failed. It
// returns once the server serves (usually 0.3–1 s: test servers run their
// JIT at its quick tier only). When java or the ZooKeeper jars are missing
// it skips the test, or fails it if the environment sets ZK_REQUIRED=1; any
// other failure to start fails the test.
func StartServer(t testing.TB, opts ...ServerOption) *Server {
	t.Helper()
	dir := t.TempDir()
	cfg := newServerConfig(opts)
	cfg.quickJIT = true
	s, err := launchServer(t.Context(), dir, false, cfg)
	if err != nil {
		failOrSkip(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ZooKeeper %s log tail:\n%s", s.Addr(), s.proc.logTail(40))
		}
		s.Close()
	})
	return s
}

// LaunchServer starts a standalone ZooKeeper server for a program (the demo,
// a benchmark) and returns once it serves. Close stops it and removes its
// data. It returns an error wrapping ErrNotInstalled when java or the jars
// are missing.
func LaunchServer(ctx context.Context, opts ...ServerOption) (*Server, error) {
	dir, err := os.MkdirTemp("", "zkrecipes-zk-")
	if err != nil {
		return nil, err
	}
	s, err := launchServer(ctx, dir, true, newServerConfig(opts))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// launchServer starts a server in dir, with new ports when the ones picked
// were taken before the JVM could bind them.
func launchServer(ctx context.Context, dir string, ownDir bool, cfg serverConfig) (*Server, error) {
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	s := &Server{
		proc: &zkProcess{name: "zookeeper", dir: dir, jvmArgs: jvmArguments(cfg)},
		java: java, cfg: cfg, ownDir: ownDir,
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		if err := s.proc.writeConfig(cfg, ports[0], 0, nil); err != nil {
			return nil, err
		}
		if err := s.proc.start(java); err != nil {
			return nil, err
		}
		_, err = s.proc.waitServing(ctx)
		if err == nil {
			return s, nil
		}
		s.proc.kill()
		if attempt == 3 || !s.proc.bindFailed() {
			return nil, err
		}
	}
}

// failOrSkip ends a test that could not get a server: a skip when ZooKeeper
// is not installed (unless ZK_REQUIRED=1), a failure otherwise.
func failOrSkip(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv("ZK_REQUIRED") != "1" {
		t.Skipf("%v (set ZK_REQUIRED=1 to make this a failure)", err)
	}
	t.Fatal(err)
}

// Addr is the client address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.proc.addr }

// Stop kills the server (SIGKILL: clients see the connection drop, as when
// a machine dies) and waits until it is gone. Its data stays, so Start can
// bring the same server back, with its sessions, on the same port.
func (s *Server) Stop() { s.proc.kill() }

// Start starts a stopped server again with its data and port, and returns
// once it serves. Sessions whose timeout has not run out are still valid.
func (s *Server) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.startTimeout)
	defer cancel()
	if err := s.proc.start(s.java); err != nil {
		return err
	}
	if _, err := s.proc.waitServing(ctx); err != nil {
		s.proc.kill()
		return err
	}
	return nil
}

// LogTail returns the last n lines of the server's log (stdout and stderr
// of the JVM).
func (s *Server) LogTail(n int) string { return s.proc.logTail(n) }

// Close stops the server and, for one started by LaunchServer, removes its
// data directory. It is idempotent.
func (s *Server) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.proc.kill()
	if s.ownDir {
		if err := os.RemoveAll(s.proc.dir); err != nil {
			return fmt.Errorf("testkit: remove server data: %w", err)
		}
	}
	return nil
}
