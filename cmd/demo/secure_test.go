package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/internal/zkflags"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// normalize takes out of the demo's output what changes from run to run:
// the time column, node uuids and tokens.
func normalize(out string) string {
	for _, r := range []struct{ re, with string }{
		{`(?m)^ +[0-9.]+ms  `, ""},
		{`_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-`, "_c_<uuid>-"},
		{`token[= ]0x[0-9a-f]+`, "token <token>"},
	} {
		out = regexp.MustCompile(r.re).ReplaceAllString(out, r.with)
	}
	return out
}

// -scenario secure on the simulator, line by line (testdata/secure.txt):
// bob reads alice's holder, his delete and Acquire are refused with
// zk.ErrNoAuth, alice holds throughout, her paths are relative to her
// chroot. No output, span or event shows a password.
func TestSecureScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	traceFile := filepath.Join(t.TempDir(), "trace.json")
	var out, stderr bytes.Buffer
	if code := run(ctx, []string{"-scenario", "secure", "-waterfall=false", "-trace-json", traceFile}, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), out.String())
	}
	golden.Check(t, "secure", normalize(out.String()))
	trace, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(trace, []byte("/locks/orders/_c_")) {
		t.Errorf("the trace has no node of alice's lock")
	}
	for _, o := range []string{out.String(), stderr.String(), string(trace)} {
		if strings.Contains(o, "-pw-") {
			t.Errorf("a password in the output:\n%s", o)
		}
	}
}

// ZKR_AUTH applies to every session of every scenario, on the simulator
// too: the nodes the lock scenario leaves are its identity's, and an
// unauthenticated session cannot write there.
func TestZKRAuthOnSim(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	zkf := zkflags.Register(fs, "", "")
	settings, err := zkf.Parse(func(string) string { return "digest:ops:ops-pw-1" })
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(settings, "")
	var out bytes.Buffer
	if err := lockScenario(ctx, c, newPrinter(&out), 2, 1, time.Millisecond); err != nil {
		t.Fatalf("lock: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "on the embedded simulator as digest user ops\n") || strings.Contains(out.String(), "ops-pw-1") {
		t.Errorf("output does not name the identity, or shows its password:\n%s", out.String())
	}
	raw := c.sim.Connect()
	defer raw.Close()
	if _, err := raw.Create(ctx, "/demo/lock/x", nil, zk.ModePersistent); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("an unauthenticated create in the lock's directory: %v, want zk.ErrNoAuth", err)
	}
}

// On a real server, -zk with a chroot and ZKR_AUTH: the scenario's nodes
// are under the chroot, which only the identity may write.
func TestChrootAndAuthOnARealServer(t *testing.T) {
	srv := testkit.StartServer(t)
	t.Setenv("ZKR_AUTH", "digest:ops:ops-pw-2")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out, stderr bytes.Buffer
	if code := run(ctx, []string{"-zk", srv.Addr() + "/tenant", "-scenario", "lock", "-workers", "2", "-rounds", "1", "-waterfall=false"}, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), out.String())
	}
	if !strings.Contains(out.String(), "on ZooKeeper "+srv.Addr()+"/tenant as digest user ops\n") || strings.Contains(out.String()+stderr.String(), "ops-pw-2") {
		t.Errorf("output does not name the place and identity, or shows the password:\n%s", out.String())
	}
	raw, err := zk.Connect(ctx, []string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, ok, err := raw.Exists(ctx, "/demo"); ok || err != nil {
		t.Errorf("/demo outside the chroot: exists %t, %v", ok, err)
	}
	if _, ok, err := raw.Exists(ctx, "/tenant"); !ok || err != nil {
		t.Errorf("the chroot /tenant: exists %t, %v", ok, err)
	}
	if _, err := raw.Create(ctx, "/tenant/x", nil, zk.ModePersistent); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("an unauthenticated create under the chroot: %v, want zk.ErrNoAuth", err)
	}

	// The secure scenario in that chroot: its owner opens /apps to alice.
	out.Reset()
	if code := run(ctx, []string{"-zk", srv.Addr() + "/tenant", "-scenario", "secure", "-waterfall=false"}, &out, &stderr); code != 0 {
		t.Fatalf("secure: exit %d: %s\n%s", code, stderr.String(), out.String())
	}
	if !strings.Contains(out.String(), "digest user ops made /apps") || !strings.Contains(out.String(), "alice held the lock throughout: true") {
		t.Errorf("secure in a chroot owned by ZKR_AUTH's identity:\n%s", out.String())
	}
	if _, ok, err := raw.Exists(ctx, "/tenant/apps/billing"); !ok || err != nil {
		t.Errorf("alice's chroot under -zk's: exists %t, %v", ok, err)
	}
}

// Bad connection settings exit 2 before anything is dialled.
func TestBadConnectionSettings(t *testing.T) {
	for _, tt := range []struct {
		name, auth string
		args       []string
	}{
		{"a relative chroot", "", []string{"-zk", "127.0.0.1:1/apps/"}},
		{"an empty server", "", []string{"-zk", "127.0.0.1:1,"}},
		{"a digest without a password", "digest:ops", nil},
		{"TLS on the simulator", "", []string{"-tls-ca", "/dev/null"}},
		{"a CA file without a certificate", "", []string{"-zk", "127.0.0.1:1", "-tls-ca", "/dev/null"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ZKR_AUTH", tt.auth)
			var out, stderr bytes.Buffer
			if code := run(t.Context(), append(tt.args, "-scenario", "lock"), &out, &stderr); code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if out.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "demo: ") {
				t.Errorf("stdout %q, stderr %q; want one line on stderr", out.String(), stderr.String())
			}
		})
	}
}
