package zk

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// The real-server tests share one standalone ZooKeeper 3.8, started by
// package zkserver (which, unlike testkit, does not import this package) on
// first use and stopped by TestMain.
var (
	sharedOnce sync.Once
	shared     *zkserver.Server
	sharedErr  error
)

// needServer returns the address of the shared server. If it cannot be
// started the test is skipped, or fails when ZK_REQUIRED=1.
func needServer(t testing.TB) string {
	t.Helper()
	sharedOnce.Do(func() {
		shared, sharedErr = zkserver.Launch(context.Background(),
			zkserver.WithQuickJIT(true), zkserver.WithMaxSessionTimeout(4*time.Second), // sessions of 400 ms .. 4 s
			zkserver.WithContainerCheckInterval(100*time.Millisecond), zkserver.WithStartTimeout(30*time.Second))
	})
	if sharedErr != nil {
		if os.Getenv("ZK_REQUIRED") == "1" {
			t.Fatalf("ZooKeeper server cannot start (ZK_REQUIRED=1): %v", sharedErr)
		}
		t.Skipf("ZooKeeper server cannot start: %v", sharedErr)
	}
	return shared.Addr()
}

func stopSharedServer() {
	if shared != nil {
		shared.Close()
	}
	if sharedTLS != nil {
		sharedTLS.Close()
	}
}

// The TLS tests share a second server, with a secure client port and a
// plain one.
var (
	sharedTLSOnce sync.Once
	sharedTLS     *zkserver.Server
	sharedTLSErr  error
)

// needTLSServer returns the shared TLS server, started on first use, or
// skips (fails with ZK_REQUIRED=1) as needServer does.
func needTLSServer(t testing.TB) *zkserver.Server {
	t.Helper()
	sharedTLSOnce.Do(func() {
		sharedTLS, sharedTLSErr = zkserver.Launch(context.Background(), zkserver.WithTLS(true),
			zkserver.WithQuickJIT(true), zkserver.WithMaxSessionTimeout(5*time.Minute), zkserver.WithStartTimeout(30*time.Second))
	})
	if sharedTLSErr != nil {
		if os.Getenv("ZK_REQUIRED") == "1" {
			t.Fatalf("ZooKeeper TLS server cannot start (ZK_REQUIRED=1): %v", sharedTLSErr)
		}
		t.Skipf("ZooKeeper TLS server cannot start: %v", sharedTLSErr)
	}
	return sharedTLS
}

// proxy is a loopback TCP proxy in front of the server, for fault
// injection: Cut closes the current connections, Blackhole silently drops
// everything on them and refuses new ones until Restore, MuteNext accepts
// connections that are never answered. It counts the requests (frames other
// than the handshake and pings) clients send.
type proxy struct {
	ln     net.Listener
	target string

	raw bool // copy bytes without reading frames (TLS); Requests stays 0

	mu        sync.Mutex
	blackhole bool
	mute      int   // connections still to accept and never answer
	dropOp    int32 // the next client request of this opcode is dropped and its connection cut; 0: none
	conns     map[net.Conn]struct{}
	requests  int
	wg        sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy { return startProxy(t, target, false) }

// newRawProxy is a proxy that copies bytes without reading frames, for
// TLS connections; it counts no requests.
func newRawProxy(t testing.TB, target string) *proxy { return startProxy(t, target, true) }

func startProxy(t testing.TB, target string, raw bool) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, raw: raw, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refused, muted := p.blackhole, p.mute > 0
		if muted {
			p.mute--
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if refused {
			c.Close()
			continue
		}
		if muted {
			p.wg.Add(1)
			go p.swallow(c)
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s, true)
		go p.pipe(s, c, false)
	}
}

// pipe copies frames (4-byte big-endian length, then the body) from src to
// dst, dropping them while black-holed; from the client it counts requests.
func (p *proxy) pipe(src, dst net.Conn, fromClient bool) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		src.Close()
		dst.Close()
	}()
	if p.raw {
		io.Copy(dst, src)
		return
	}
	r := bufio.NewReader(src)
	handshake := true
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		p.mu.Lock()
		drop := p.blackhole
		cut := false
		if fromClient && !handshake && !drop && n >= 8 {
			op := int32(body[4])<<24 | int32(body[5])<<16 | int32(body[6])<<8 | int32(body[7])
			if op != 11 { // 11: ping
				p.requests++
			}
			if op == p.dropOp {
				p.dropOp, cut = 0, true
			}
		}
		p.mu.Unlock()
		if cut {
			return
		}
		handshake = false
		if drop {
			continue
		}
		if _, err := dst.Write(append(hdr[:], body...)); err != nil {
			return
		}
	}
}

// swallow reads and drops what the client sends until either side closes
// c, as a server that took the connection but never serves it.
func (p *proxy) swallow(c net.Conn) {
	defer p.wg.Done()
	io.Copy(io.Discard, c)
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// MuteNext makes the next n connections accepted ones that are never
// answered (until Cut or Restore closes them).
func (p *proxy) MuteNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mute = n
}

// DropAndCut makes the proxy drop the next client request of opcode op
// (it never reaches the server) and close that connection.
func (p *proxy) DropAndCut(op int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropOp = op
}

// Requests is the number of requests forwarded to the server so far.
func (p *proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// Cut closes both sides of every current connection.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Blackhole makes the current connections drop everything silently and
// refuses new ones.
func (p *proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
}

// Restore ends Blackhole: the silent connections are closed, new ones work.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = false
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
