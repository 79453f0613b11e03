package zk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"
)

// hostProvider is the go-zookeeper HostProvider the adapter installs in
// place of the default one, which waits a fixed second (and fails every
// queued request with ErrNoServer) each time it has gone once through the
// server list: with a single server, before every reconnect.
//
// This one never asks for that pause. It hands out the servers in turn; the
// first pass after a connection was lost (or, initially, after Init) goes
// through at once, and each further pass without a successful handshake
// waits a backoff first: base, then doubling up to max, each drawn from the
// upper half of its value (jitter). The wait ends early when stop is closed;
// from then on Next reports retryStart, which is what makes go-zookeeper's
// connect loop notice that it is being closed.
//
// go-zookeeper calls Next and Connected from its connection goroutine only,
// after Init, so the provider needs no lock.
type hostProvider struct {
	base, max time.Duration
	stop      <-chan struct{}
	jitter    func(time.Duration) time.Duration

	servers []string
	next    int // index of the server Next hands out
	failed  int // Next calls since the last Connected
}

func newHostProvider(base, max time.Duration, stop <-chan struct{}) *hostProvider {
	return &hostProvider{base: base, max: max, stop: stop, jitter: upperHalf}
}

// upperHalf draws a duration uniformly from [d/2, d].
func upperHalf(d time.Duration) time.Duration {
	return d/2 + rand.N(d-d/2+1)
}

func (p *hostProvider) Init(servers []string) error {
	if len(servers) == 0 {
		return ErrNoServers
	}
	p.servers = slices.Clone(servers)
	return nil
}

func (p *hostProvider) Len() int { return len(p.servers) }

// Next returns the server to dial, after the backoff owed for the failed
// passes before it. retryStart is true only once stop is closed.
func (p *hostProvider) Next() (server string, retryStart bool) {
	server = p.servers[p.next]
	p.next = (p.next + 1) % len(p.servers)
	var wait time.Duration
	if n := len(p.servers); p.failed >= n && p.failed%n == 0 {
		wait = p.jitter(p.backoff(p.failed/n - 1))
	}
	p.failed++
	select {
	case <-p.stop:
		return server, true
	default:
	}
	if wait <= 0 {
		return server, false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return server, false
	case <-p.stop:
		return server, true
	}
}

// Connected is called by go-zookeeper after a successful handshake.
func (p *hostProvider) Connected() { p.failed = 0 }

// backoff is the (unjittered) wait before pass k+1 after k+1 failed passes:
// base·2^k, capped at max.
func (p *hostProvider) backoff(k int) time.Duration {
	d := p.base
	for range k {
		if d >= p.max/2 {
			return p.max
		}
		d *= 2
	}
	return min(d, p.max)
}

// dialer is the go-zookeeper Dialer the adapter installs: a plain TCP dial
// that stop interrupts, and that remembers the connection it made last so
// that Close can break a handshake stuck on a dead connection (go-zookeeper
// waits up to ten receive timeouts for the server's handshake reply). Each
// connection is wrapped in a handshakeGuard, closing it when no handshake
// reply came within handshake, and in a resyncConn (see
// resyncGrace); watching tells it whether go-zookeeper may hold watches
// (nil: never).
//
// With tls set, each connection speaks TLS, its handshake done within
// handshake. A failed TLS handshake is a failed dial; once one has failed
// with as many servers in a row as there are servers, and none succeeded
// since, the last error is sent (without blocking) on tlsFailed, which
// Connect, still waiting for its first session, returns.
type dialer struct {
	stop      context.Context
	handshake time.Duration
	watching  func() bool
	stats     resyncStats
	tls       *tls.Config
	servers   int
	tlsFailed chan error

	mu       sync.Mutex
	conn     net.Conn
	tlsFails int // TLS handshakes failed in a row
}

var errStopping = errors.New("zk: connection is being closed")

func (d *dialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nd := net.Dialer{Timeout: timeout}
	conn, err := nd.DialContext(d.stop, network, address)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		if conn, err = d.tlsHandshake(conn, address); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stop.Err() != nil {
		conn.Close()
		return nil, errStopping
	}
	watching := d.watching
	if watching == nil {
		watching = func() bool { return false }
	}
	d.conn = newResyncConn(newHandshakeGuard(conn, d.handshake), watching, resyncGrace, resyncGateGrace, &d.stats)
	return d.conn, nil
}

// tlsHandshake runs a TLS client handshake on conn, closing it on failure.
// The error names TLS and the server; its cause is the tls package's.
func (d *dialer) tlsHandshake(conn net.Conn, address string) (net.Conn, error) {
	cfg := d.tls
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	ctx, cancel := context.WithTimeout(d.stop, d.handshake)
	defer cancel()
	tc := tls.Client(conn, cfg)
	err := tc.HandshakeContext(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.tlsFails = 0
		return tc, nil
	}
	conn.Close()
	err = fmt.Errorf("zk: TLS handshake with %s: %w", address, err)
	if d.tlsFails++; d.tlsFails >= d.servers && d.tlsFailed != nil {
		select {
		case d.tlsFailed <- fmt.Errorf("%w (every server failed its TLS handshake)", err):
		default:
		}
	}
	return nil, err
}

// closeConn closes the last connection dialled (go-zookeeper may already
// have closed it; closing twice is harmless). Call it once stop is done.
func (d *dialer) closeConn() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil {
		d.conn.Close()
	}
}
