package testkit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// The "zk-tls" target keeps the fault verbs' contract on a server with no
// plain-text port, and its sessions are the server's TLS connections.
func TestTLSTargetVerbs(t *testing.T) {
	srv := StartServer(t, zkserver.WithTLS(false))
	if srv.Addr() != "" {
		t.Fatalf("the server has a plain-text port %s", srv.Addr())
	}
	tg := NewTLSServerTarget(srv)
	if tg.Name() != "zk-tls" {
		t.Fatalf("Name() = %q", tg.Name())
	}
	targetVerbs(t, tg)

	c := tg.Connect(t)
	cons, err := zkserver.FourLetterWordTLS(t.Context(), srv.TLSAddr(), srv.TLSConfig(), "cons")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cons, fmt.Sprintf("sid=%#x", c.SessionID())) {
		t.Errorf("the server's connections (cons) do not show session %x:\n%s", c.SessionID(), cons)
	}
}
