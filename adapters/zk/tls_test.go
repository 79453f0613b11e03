package zk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

func TestTLSConnect(t *testing.T) {
	srv := needTLSServer(t)
	ctx := testCtx(t, 30*time.Second)
	c := connect(t, srv.TLSAddr(), WithTLS(srv.TLSConfig()), WithAuth("digest", []byte("tls:pw")), WithChroot("/tls"))
	if _, err := c.Create(ctx, "/n", []byte("over TLS"), ModePersistent); err != nil {
		t.Fatal(err)
	}
	_, _, w, err := c.GetW(ctx, "/n")
	if err != nil {
		t.Fatal(err)
	}
	// Another client on the plain port sees the node, and may not change it.
	plain := connect(t, srv.Addr())
	if d, _, err := plain.Get(ctx, "/tls/n"); err != nil || string(d) != "over TLS" {
		t.Fatalf("plain client reads %q, %v", d, err)
	}
	if _, err := c.Set(ctx, "/n", []byte("changed"), AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := waitWatch(t, w, eventWait); ev.Type != EventNodeDataChanged || ev.Path != "/n" {
		t.Fatalf("watch over TLS: %+v", ev)
	}
	// The connection is TLS: it reports the secure port.
	if cl, _ := Underlying[*client](c); cl.Server() != srv.TLSAddr() {
		t.Fatalf("connected to %s, want %s", cl.Server(), srv.TLSAddr())
	}
}

func TestTLSReconnectKeepsTheIdentity(t *testing.T) {
	srv := needTLSServer(t)
	ctx := testCtx(t, 30*time.Second)
	p := newRawProxy(t, srv.TLSAddr())
	c := connect(t, p.Addr(), WithTLS(srv.TLSConfig()), WithAuth("digest", []byte("tls-cut:pw")))
	root := testRoot(t, c)
	rec := record(t, c)
	p.Cut()
	rec.expect(t, eventWait, StateSuspended, StateReconnected)
	if _, err := c.Set(ctx, root, []byte("after the cut"), AnyVersion); err != nil {
		t.Fatalf("set after a TLS reconnect: %v", err)
	}
}

func TestTLSFailuresAreFastAndNameTLS(t *testing.T) {
	srv := needTLSServer(t)
	plainAddr := needServer(t)
	for _, tc := range []struct {
		name    string
		servers []string
		cfg     *tls.Config
		check   func(error) bool
	}{
		{"server not trusted", []string{srv.TLSAddr()}, &tls.Config{}, func(err error) bool {
			var unknown x509.UnknownAuthorityError
			return errors.As(err, &unknown)
		}},
		{"wrong server name", []string{srv.TLSAddr()}, withServerName(srv.TLSConfig(), "zk.example.com"), func(err error) bool {
			var host x509.HostnameError
			return errors.As(err, &host)
		}},
		{"plain-text server", []string{plainAddr}, srv.TLSConfig(), func(error) bool { return true }},
		{"every server of two", []string{plainAddr, srv.TLSAddr()}, &tls.Config{}, func(error) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			c, err := Connect(testCtx(t, 20*time.Second), tc.servers, WithTLS(tc.cfg))
			d := time.Since(t0)
			if c != nil || err == nil || !strings.Contains(err.Error(), "TLS") || !tc.check(err) {
				t.Fatalf("Connect = %v, %v; want an error naming TLS", c, err)
			}
			if errors.Is(err, context.DeadlineExceeded) || d > 5*time.Second {
				t.Fatalf("Connect failed after %v (%v), want at once", d, err)
			}
			t.Logf("%v after %v", err, d)
		})
	}
}

func withServerName(cfg *tls.Config, name string) *tls.Config {
	cfg.ServerName = name
	return cfg
}

// received is the number of packets the server has received on the
// connection of session sid, from cons asked on the port the connection is
// on (each port lists its own connections).
func received(t *testing.T, srv *zkserver.Server, secure bool, sid int64) int {
	t.Helper()
	ctx := testCtx(t, 5*time.Second)
	var out string
	var err error
	if secure {
		out, err = zkserver.FourLetterWordTLS(ctx, srv.TLSAddr(), srv.TLSConfig(), "cons")
	} else {
		out, err = zkserver.FourLetterWord(ctx, srv.Addr(), "cons")
	}
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`recved=(\d+),.*sid=0x` + strconv.FormatInt(sid, 16) + `\b`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no connection of session %x in cons:\n%s", sid, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TLS and authentication add no request per operation: 100 creates are
// 100 packets on the server, whatever the connection. (go-zookeeper pings
// on a timer, every third of the session timeout, here every minute; a
// ping could fall in one batch, so each connection runs two batches and
// the fewer packets count.)
func TestTLSAndAuthAddNoRequestPerOperation(t *testing.T) {
	srv := needTLSServer(t)
	const ops = 100
	for _, tc := range []struct {
		name string
		addr string
		opts []Option
	}{
		{"plain", srv.Addr(), nil},
		{"plain with auth", srv.Addr(), []Option{WithAuth("digest", []byte("cost:pw"))}},
		{"TLS", srv.TLSAddr(), []Option{WithTLS(srv.TLSConfig())}},
		{"TLS with auth and a chroot", srv.TLSAddr(), []Option{WithTLS(srv.TLSConfig()),
			WithAuth("digest", []byte("cost:pw")), WithChroot("/cost")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			c := connect(t, tc.addr, append(tc.opts, WithSessionTimeout(3*time.Minute))...)
			root, err := c.Create(ctx, "/c-", nil, ModePersistentSequential)
			if err != nil {
				t.Fatal(err)
			}
			fewest := -1
			for batch := range 2 {
				before := received(t, srv, tc.addr == srv.TLSAddr(), c.SessionID())
				for i := range ops {
					if _, err := c.Create(ctx, fmt.Sprintf("%s/%d-%d", root, batch, i), nil, ModePersistent); err != nil {
						t.Fatal(err)
					}
				}
				n := received(t, srv, tc.addr == srv.TLSAddr(), c.SessionID()) - before
				if fewest < 0 || n < fewest {
					fewest = n
				}
			}
			if fewest != ops {
				t.Fatalf("%d creates took %d packets", ops, fewest)
			}
		})
	}
}
