package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Bad connection settings exit 2, print one line and no result.
func TestBadConnectionSettings(t *testing.T) {
	for _, tt := range []struct {
		name, auth string
		args       []string
	}{
		{"a relative chroot", "", []string{"-zk", "127.0.0.1:1/b/"}},
		{"an empty server", "", []string{"-zk", ",127.0.0.1:1"}},
		{"a digest without a password", "digest:ops", []string{"-zk", "sim"}},
		{"TLS on the simulator", "", []string{"-zk", "sim", "-tls-ca", "/dev/null"}},
		{"-tls-key without -tls-cert", "", []string{"-zk", "127.0.0.1:1", "-tls-key", "/dev/null"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ZKR_AUTH", tt.auth)
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), append([]string{"lock"}, tt.args...), &stdout, &stderr); code != 2 || stdout.Len() > 0 {
				t.Errorf("exit %d, stdout %q; want 2 and no line; stderr: %s", code, stdout.String(), stderr.String())
			}
			if strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("stderr %q, want one line", stderr.String())
			}
		})
	}
}

// ZKR_AUTH on the simulator: the sessions authenticate (zk.Wrap), and the
// bench runs as without.
func TestLockBenchOnSimAuthenticated(t *testing.T) {
	t.Setenv("ZKR_AUTH", "digest:bench:bench-pw")
	out := runBench(t, "lock", "-zk", "sim", "-clients", "2", "-duration", "200ms", "-warmup", "50ms")
	if out["ok"] != true || out["lock_nodes_left"] != 0.0 {
		t.Errorf("ok %v, lock_nodes_left %v", out["ok"], out["lock_nodes_left"])
	}
}

// On a real server, -zk with a chroot and ZKR_AUTH: the bench's nodes are
// under the chroot, which only its identity may write; a credential the
// server refuses is a one-line error within 2 s.
func TestChrootAndAuthOnARealServer(t *testing.T) {
	srv := testkit.StartServer(t)
	t.Setenv("ZKR_AUTH", "digest:bench:bench-pw")
	out := runBench(t, "lock", "-zk", srv.Addr()+"/benches", "-clients", "2", "-duration", "300ms", "-warmup", "50ms", "-path", "/lockbench")
	if out["ok"] != true || out["lock_nodes_left"] != 0.0 {
		t.Errorf("ok %v, lock_nodes_left %v", out["ok"], out["lock_nodes_left"])
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	raw, err := zk.Connect(ctx, []string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, ok, err := raw.Exists(ctx, "/benches"); !ok || err != nil {
		t.Errorf("the chroot /benches: exists %t, %v", ok, err)
	}
	if _, err := raw.Create(ctx, "/benches/x", nil, zk.ModePersistent); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("an unauthenticated create under the chroot: %v, want zk.ErrNoAuth", err)
	}

	t.Setenv("ZKR_AUTH", "nosuchscheme:x")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"rtt", "-zk", srv.Addr(), "-n", "1"}, &stdout, &stderr)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a refused credential took %v, want under 2s", d)
	}
	if code != 1 || stdout.Len() > 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "authentication failed") {
		t.Errorf("a refused credential: exit %d, stdout %q, stderr %q; want 1 and one line naming it", code, stdout.String(), stderr.String())
	}
}
