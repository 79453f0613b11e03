package testkit

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// The real ZooKeeper of these tests is package zkserver's, which links no
// testing package: programs use it directly.
type (
	// Server is a standalone ZooKeeper server.
	Server = zkserver.Server
	// Ensemble is a 3-server ZooKeeper ensemble.
	Ensemble = zkserver.Ensemble
	// ServerOption configures the servers StartServer and StartEnsemble
	// start.
	ServerOption = zkserver.Option
)

// The options of StartServer and StartEnsemble (see package zkserver).
var (
	WithTickTime               = zkserver.WithTickTime
	WithMaxSessionTimeout      = zkserver.WithMaxSessionTimeout
	WithContainerCheckInterval = zkserver.WithContainerCheckInterval
	WithForceSync              = zkserver.WithForceSync
	WithHeap                   = zkserver.WithHeap
	WithStartTimeout           = zkserver.WithStartTimeout
)

// ErrNotInstalled is zkserver.ErrNotInstalled: java or the ZooKeeper jars
// are missing.
var ErrNotInstalled = zkserver.ErrNotInstalled

// FourLetterWord is zkserver.FourLetterWord: it sends one of ZooKeeper's
// four-letter words ("srvr", "mntr", "wchc", ...) to addr and returns the
// reply.
func FourLetterWord(ctx context.Context, addr, word string) (string, error) {
	return zkserver.FourLetterWord(ctx, addr, word)
}

// StartServer starts a standalone ZooKeeper server for the test and stops it
// when the test ends, printing the tail of its log if the test failed. It
// returns once the server serves (usually 0.3–1 s: test servers run their
// JIT at its quick tier only). When java or the ZooKeeper jars are missing
// it skips the test, or fails it if the environment sets ZK_REQUIRED=1; any
// other failure to start fails the test.
func StartServer(t testing.TB, opts ...ServerOption) *Server {
	t.Helper()
	s, err := zkserver.Launch(t.Context(), append([]ServerOption{zkserver.WithQuickJIT(true)}, opts...)...)
	if err != nil {
		failOrSkip(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ZooKeeper %s log tail:\n%s", s.Addr(), s.LogTail(40))
		}
		s.Close()
	})
	return s
}

// StartEnsemble starts a 3-server ensemble for the test and stops it when
// the test ends, printing the tail of each server's log if the test failed.
// It returns once every server serves and one of them leads (usually within
// 1.5–2 s). Like StartServer it skips the test when ZooKeeper is not
// installed, unless ZK_REQUIRED=1.
func StartEnsemble(t testing.TB, opts ...ServerOption) *Ensemble {
	t.Helper()
	e, err := zkserver.LaunchEnsemble(t.Context(), append([]ServerOption{zkserver.WithQuickJIT(true)}, opts...)...)
	if err != nil {
		failOrSkip(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			addrs := e.Addrs()
			if addrs == nil { // WithTLS(false)
				addrs = e.TLSAddrs()
			}
			for i, addr := range addrs {
				t.Logf("ZooKeeper ensemble server %d (%s) log tail:\n%s", i, addr, e.LogTail(i, 25))
			}
		}
		e.Close()
	})
	return e
}

// LaunchServer starts a standalone ZooKeeper server for a program.
//
// Deprecated: use zkserver.Launch, which links no testing package.
func LaunchServer(ctx context.Context, opts ...ServerOption) (*Server, error) {
	return zkserver.Launch(ctx, opts...)
}

// LaunchEnsemble starts a 3-server ensemble for a program.
//
// Deprecated: use zkserver.LaunchEnsemble, which links no testing package.
func LaunchEnsemble(ctx context.Context, opts ...ServerOption) (*Ensemble, error) {
	return zkserver.LaunchEnsemble(ctx, opts...)
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
