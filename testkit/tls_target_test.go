package testkit

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// TestTLSProxyFaults drives every fault of a TLS-terminating proxy on a
// client that speaks TLS to it, in front of a server with no plain-text
// port: the client's TLS handshake is the proxy's, the proxy's is the
// server's, and the frames in between are read as on plain text.
func TestTLSProxyFaults(t *testing.T) {
	srv := StartServer(t, zkserver.WithTLS(false))
	// A failed step must not leave the next one waiting for ever.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p, err := NewTLSProxy(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := zk.Connect(ctx, []string{p.Addr()}, zk.WithTLS(srv.TLSConfig()), zk.WithSessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w := watchStates(c)
	defer func() {
		w.stop()
		p.Unblock()
		c.Close()
	}()
	dc, err := zk.Connect(ctx, []string{srv.TLSAddr()}, zk.WithTLS(srv.TLSConfig()), zk.WithSessionTimeout(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if _, err := dc.Create(ctx, "/tls", nil, zk.ModePersistent); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	sid := c.SessionID()
	eph, err := c.Create(ctx, "/tls/e", []byte("x"), zk.ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := zkserver.FourLetterWordTLS(ctx, srv.TLSAddr(), srv.TLSConfig(), "cons")
	if err != nil || !strings.Contains(cons, fmt.Sprintf("sid=%#x", sid)) {
		t.Fatalf("the server's connections (cons, %v) do not show session %#x:\n%s", err, sid, cons)
	}

	t.Run("Cut", func(t *testing.T) {
		p.Cut()
		w.await(t, "Cut", zk.StateSuspended, zk.StateReconnected)
		if c.SessionID() != sid {
			t.Fatalf("session changed across a cut: %#x -> %#x", sid, c.SessionID())
		}
		if data, _, err := c.Get(ctx, eph); err != nil || string(data) != "x" {
			t.Fatalf("after the cut: Get(%s) = %q, %v", eph, data, err)
		}
	})
	t.Run("Block", func(t *testing.T) {
		p.Block()
		defer p.Unblock() // if the test fails first
		p.Cut()
		w.await(t, "Block", zk.StateSuspended)
		if p.Carries(sid) {
			t.Fatal("a blocked proxy carries the session")
		}
		p.Unblock()
		w.await(t, "Unblock", zk.StateReconnected)
		if c.SessionID() != sid {
			t.Fatalf("session changed across a block: %#x -> %#x", sid, c.SessionID())
		}
	})
	t.Run("LoseNextReply", func(t *testing.T) {
		f := p.LoseNextReply(OpCreate, "/tls/n-")
		_, err := c.Create(ctx, "/tls/n-", nil, zk.ModeEphemeralSequential)
		if !errors.Is(err, zk.ErrConnectionLoss) {
			t.Fatalf("create with a lost reply: %v, want ErrConnectionLoss", err)
		}
		select {
		case <-f.Fired():
		default:
			t.Fatal("the create's reply was lost, and Fired is open")
		}
		w.await(t, "LoseNextReply", zk.StateSuspended, zk.StateReconnected)
		kids, _, err := dc.Children(ctx, "/tls")
		if err != nil || !slices.ContainsFunc(kids, func(k string) bool { return strings.HasPrefix(k, "n-") }) {
			t.Fatalf("children of /tls = %v, %v; want the node the lost create made", kids, err)
		}
	})
	t.Run("HoldNextReply", func(t *testing.T) {
		f := p.HoldNextReply(OpSet, "/tls/e")
		defer f.Release()
		done := make(chan error, 1)
		go func() {
			_, err := c.Set(ctx, eph, []byte("y"), zk.AnyVersion)
			done <- err
		}()
		<-f.Fired()
		select {
		case err := <-done:
			t.Fatalf("the set returned (%v) while its reply was held", err)
		default:
		}
		f.Release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ExpireSession", func(t *testing.T) {
		if err := p.ExpireSession(ctx, sid); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := dc.Exists(ctx, eph); err != nil || ok {
			t.Fatalf("after ExpireSession the ephemeral exists=%v (%v)", ok, err)
		}
		w.await(t, "ExpireSession", zk.StateLost, zk.StateConnected)
		if c.SessionID() == sid || !p.Carries(c.SessionID()) {
			t.Fatalf("after expiry: session %#x (was %#x), carried %v", c.SessionID(), sid, p.Carries(c.SessionID()))
		}
		if _, err := c.Create(ctx, "/tls/again", nil, zk.ModeEphemeral); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTLSProxyRefuses: a TLS proxy needs a server with a secure port, and
// both configs, the listener's with a certificate.
func TestTLSProxyRefuses(t *testing.T) {
	if _, err := NewTLSProxy(sharedServer(t)); !errors.Is(err, zkrecipes.ErrInvalidOption) {
		t.Errorf("NewTLSProxy on a server without TLS: %v, want ErrInvalidOption", err)
	}
	for name, opt := range map[string]ProxyOption{
		"nil listen":     proxy.WithTLS(nil, &tls.Config{}),
		"nil dial":       proxy.WithTLS(&tls.Config{Certificates: []tls.Certificate{{}}}, nil),
		"no certificate": proxy.WithTLS(&tls.Config{}, &tls.Config{}),
	} {
		if p, err := NewProxy("127.0.0.1:1", opt); !errors.Is(err, zkrecipes.ErrInvalidOption) {
			if p != nil {
				p.Close()
			}
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
		if p, err := NewEnsembleProxy([]string{"127.0.0.1:1"}, opt); !errors.Is(err, zkrecipes.ErrInvalidOption) {
			if p != nil {
				p.Close()
			}
			t.Errorf("ensemble, %s: %v, want ErrInvalidOption", name, err)
		}
	}
}

// TestTLSEnsemble: an ensemble with secure client ports only, reached
// through TLS proxies: a session follows its carrier's death to another
// member over TLS, and is expired through the proxies.
func TestTLSEnsemble(t *testing.T) {
	e := StartEnsemble(t, zkserver.WithTLS(false))
	ctx := t.Context()
	if e.Addrs() != nil || len(e.TLSAddrs()) != 3 {
		t.Fatalf("Addrs %v, TLSAddrs %v; want no plain-text port and 3 secure ones", e.Addrs(), e.TLSAddrs())
	}
	px, err := NewTLSEnsembleProxy(e)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	c, err := zk.Connect(ctx, px.Addrs(), zk.WithTLS(e.TLSConfig()), zk.WithSessionTimeout(8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := watchStates(c)
	defer w.stop()
	sid := c.SessionID()
	eph, err := c.Create(ctx, "/eph", nil, zk.ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	first, ok := px.Carrier(sid)
	if !ok {
		t.Fatalf("no member carries session %#x", sid)
	}
	if err := e.Kill(first); err != nil {
		t.Fatal(err)
	}
	w.await(t, "Kill", zk.StateSuspended, zk.StateReconnected)
	if now, ok := px.Carrier(sid); !ok || now == first || c.SessionID() != sid {
		t.Fatalf("after killing member %d: carrier %d (%v), session %#x (was %#x)", first, now, ok, c.SessionID(), sid)
	}
	if err := e.Restart(ctx, first); err != nil {
		t.Fatal(err)
	}
	// A write in the new epoch: a follower reports the last zxid it
	// applied, which is behind the leader's until one comes.
	if _, err := c.Create(ctx, "/after-restart", nil, zk.ModeEphemeral); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := e.WaitSynced(wctx); err != nil {
		t.Fatal(err)
	}
	if n, err := e.DigestMismatches(ctx); err != nil || n != 0 {
		t.Fatalf("DigestMismatches over TLS = %d, %v", n, err)
	}
	if err := px.ExpireSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
	w.await(t, "ExpireSession", zk.StateLost, zk.StateConnected)
	if err := c.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Exists(ctx, eph); err != nil || ok {
		t.Fatalf("after ExpireSession the ephemeral exists=%v (%v)", ok, err)
	}
}
