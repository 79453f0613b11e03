package zkserver

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

func TestTLSServer(t *testing.T) {
	for _, plain := range []bool{true, false} {
		name := map[bool]string{true: "with a plain port", false: "TLS only"}[plain]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			s, err := Launch(ctx, WithTLS(plain), WithQuickJIT(true), WithSuperUser("super", "super-pw"))
			need(t, err)
			defer s.Close()
			if s.TLSAddr() == "" || s.TLSConfig() == nil || (s.Addr() != "") != plain {
				t.Fatalf("Addr %q, TLSAddr %q, TLSConfig %v", s.Addr(), s.TLSAddr(), s.TLSConfig())
			}
			reply, err := FourLetterWordTLS(ctx, s.TLSAddr(), s.TLSConfig(), "srvr")
			if err != nil || !strings.Contains(reply, "Mode: standalone") {
				t.Fatalf("srvr over TLS: %q, %v", reply, err)
			}
			// A client that does not trust the server's CA is refused.
			if _, err := FourLetterWordTLS(ctx, s.TLSAddr(), &tls.Config{}, "srvr"); err == nil {
				t.Fatal("srvr over TLS without the CA worked")
			}
			// A zk client over TLS; the super user passes a CreatorAll ACL.
			c, err := zk.Connect(ctx, []string{s.TLSAddr()}, zk.WithTLS(s.TLSConfig()), zk.WithAuth("digest", []byte("u:p")))
			if err != nil {
				t.Fatalf("zk.Connect over TLS: %v", err)
			}
			defer c.Close()
			if _, err := c.Create(ctx, "/owned", nil, zk.ModePersistent); err != nil {
				t.Fatal(err)
			}
			super, err := zk.Connect(ctx, []string{s.TLSAddr()}, zk.WithTLS(s.TLSConfig()), zk.WithAuth("digest", []byte("super:super-pw")))
			if err != nil {
				t.Fatal(err)
			}
			defer super.Close()
			if _, err := super.Set(ctx, "/owned", []byte("x"), zk.AnyVersion); err != nil {
				t.Fatalf("the super user sets a CreatorAll node: %v", err)
			}
			if plain {
				if reply, err := FourLetterWord(ctx, s.Addr(), "srvr"); err != nil || !strings.Contains(reply, "Mode: standalone") {
					t.Fatalf("srvr on the plain port: %q, %v", reply, err)
				}
			}
		})
	}
}
