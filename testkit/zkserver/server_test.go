package zkserver

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// need ends a test that could not get a server as testkit's tests do: a
// skip when ZooKeeper is not installed (unless ZK_REQUIRED=1), a failure
// on any other error.
func need(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv("ZK_REQUIRED") != "1" {
		t.Skipf("%v (set ZK_REQUIRED=1 to make this a failure)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestLaunch(t *testing.T) {
	s, err := Launch(t.Context(), WithForceSync(true), WithTickTime(100*time.Millisecond), WithHeap("64m"))
	need(t, err)
	dir := s.proc.dir
	cfg, err := os.ReadFile(s.proc.cfgPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"tickTime=100", "forceSync=yes", "minSessionTimeout=200"} {
		if !strings.Contains(string(cfg), line+"\n") {
			t.Errorf("zoo.cfg lacks %q:\n%s", line, cfg)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data dir %s still there after Close: %v", dir, err)
	}
}

// TestLaunchOnPortAndDataDir: a server given a port serves there, a second
// one cannot take it, and a server launched again on the same data
// directory has the first one's nodes.
func TestLaunchOnPortAndDataDir(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	launch := func() *Server {
		t.Helper()
		s, err := Launch(t.Context(), WithQuickJIT(true), WithPort(port), WithDataDir(dir))
		need(t, err)
		if want := "127.0.0.1:" + strconv.Itoa(port); s.Addr() != want {
			t.Fatalf("Addr() = %s, want %s", s.Addr(), want)
		}
		return s
	}
	s := launch()
	if _, err := Launch(t.Context(), WithPort(port)); err == nil {
		t.Fatalf("a second server launched on port %d", port)
	}
	c, err := zk.Connect(t.Context(), []string{s.Addr()}, zk.WithSessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(t.Context(), "/kept", []byte("yes"), zk.ModePersistent)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = launch()
	defer s.Close()
	c, err = zk.Connect(t.Context(), []string{s.Addr()}, zk.WithSessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if data, _, err := c.Get(t.Context(), "/kept"); err != nil || string(data) != "yes" {
		t.Fatalf("after a relaunch on the same data: Get = %q, %v", data, err)
	}
}

func TestStartTimeout(t *testing.T) {
	_, err := Launch(t.Context(), WithStartTimeout(time.Millisecond))
	if errors.Is(err, ErrNotInstalled) {
		need(t, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Launch with a 1 ms start timeout: %v", err)
	}
}
