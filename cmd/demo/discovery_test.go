package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zkflags"
	"github.com/zkrecipes/zkrecipes/testkit"
	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// Over TLS, which the demo's proxy does not speak, inst-2 crashes (its
// connection closes) and restarts: it registers again on a new session,
// and the client sees it leave and come back all the same.
func TestDiscoveryScenarioOverTLS(t *testing.T) {
	srv := testkit.StartServer(t, zkserver.WithTLS(false))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	c := newCluster(zkflags.Settings{Servers: []string{srv.TLSAddr()}, TLS: srv.TLSConfig()}, srv.TLSAddr())
	if err := discoveryScenario(ctx, c, newPrinter(&out)); err != nil {
		t.Fatalf("discovery: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"inst-2: its connection closed; the client saw it leave: [inst-1 inst-3]",
		"inst-2 restarts on a new session and registers again",
		"the client saw: [inst-1 inst-2 inst-3], then [inst-1 inst-3], then [inst-1 inst-2 inst-3]",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
