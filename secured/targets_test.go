package secured_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// forEachTarget runs fn on testkit.ForEachTarget's targets ("sim", "zk")
// and on "zk-tls": a real server of the test's own with a TLS client port
// and no plain-text one, every connection TLS, through the target's proxy
// (testkit.NewTLSServerTarget), so the fault verbs work there too.
func forEachTarget(t *testing.T, fn func(t *testing.T, tg testkit.Target)) {
	t.Helper()
	testkit.ForEachTarget(t, fn)
	t.Run("zk-tls", func(t *testing.T) {
		srv := tlsOnlyServer(t)
		fn(t, testkit.NewTLSServerTarget(srv))
	})
}

// tlsOnlyServer starts a server whose only client port is TLS.
func tlsOnlyServer(t *testing.T) *testkit.Server {
	t.Helper()
	srv := testkit.StartServer(t, zkserver.WithTLS(false))
	if srv.Addr() != "" {
		t.Fatalf("the TLS-only server has a plain-text port %s", srv.Addr())
	}
	return srv
}

// TestTLSWithoutCA: a client whose TLS config does not trust the server's
// CA (no RootCAs: the system's roots) fails Connect with an error naming
// TLS, long before its ctx ends; one trusting it connects.
func TestTLSWithoutCA(t *testing.T) {
	srv := tlsOnlyServer(t)
	const budget = 10 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	start := time.Now()
	c, err := zk.Connect(ctx, []string{srv.TLSAddr()}, zk.WithTLS(&tls.Config{}), alicePW)
	took := time.Since(start)
	if err == nil {
		c.Close()
		t.Fatal("Connect without the server's CA succeeded")
	}
	if !strings.Contains(err.Error(), "TLS") && !strings.Contains(err.Error(), "tls") {
		t.Errorf("Connect: %v: names no TLS", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || took > budget/4 {
		t.Errorf("Connect failed after %v (%v), want well within its %v ctx", took.Round(time.Millisecond), err, budget)
	}
	t.Logf("Connect without the CA: %v after %v", err, took.Round(time.Millisecond))

	c, err = zk.Connect(ctx, []string{srv.TLSAddr()}, zk.WithTLS(srv.TLSConfig()), alicePW)
	if err != nil {
		t.Fatalf("Connect trusting the server's CA: %v", err)
	}
	c.Close()
}
