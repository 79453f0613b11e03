package testkit

import (
	"bufio"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one ZooKeeper server, for
// injecting network faults under a real client: cut connections, a black
// hole, a lost or a held-back reply. It reads ZooKeeper's framing, so reply
// faults pick one request by kind and path, and it always forwards whole
// frames. Every connection made to Addr gets its own connection to the
// server. Close ends it and all its goroutines.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every link

	mu        sync.Mutex
	closed    bool
	blocked   bool
	unblocked chan struct{} // closed by Unblock; a new one per Block
	links     map[*proxyLink]struct{}
	faults    []*proxyFault // armed, in arming order
	sess      wireSession   // the last session the server handed out through us
}

// NewProxy starts a proxy on a free loopback port that forwards to target
// ("host:port").
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, links: map[*proxyLink]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every current connection, both sides, as a network failure
// would: the client reads EOF at once. Clients may connect again at once
// (unless the proxy is blocked).
func (p *Proxy) Cut() {
	p.mu.Lock()
	links := make([]*proxyLink, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Block turns the proxy into a black hole: nothing more is forwarded either
// way on current connections, and new connections are accepted but not
// connected to the server. The client hears nothing (no EOF, no ping
// replies) until it gives up on the connection by itself, and the server
// hears nothing from the client, so it expires the session after its
// timeout. Cut after Block for a client that must notice at once.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.blocked {
		p.blocked = true
		p.unblocked = make(chan struct{})
	}
}

// Unblock ends Block: held bytes and waiting connections go through.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked {
		p.blocked = false
		close(p.unblocked)
	}
}

// LoseNextReply arms a one-shot fault: the next request of kind op whose
// path (a multi's: its first op's) starts with pathPrefix is forwarded and
// applied by the server, but its reply is dropped and that connection cut.
// The client sees a connection loss for the request and reconnects with
// the same session.
func (p *Proxy) LoseNextReply(op OpKind, pathPrefix string) {
	p.arm(&proxyFault{lose: true, ops: wireOpcodes[op], prefix: pathPrefix, applied: make(chan struct{})})
}

// HoldNextReply arms a one-shot fault: the next request of kind op whose
// path starts with pathPrefix is forwarded and applied, but its reply, and
// everything after it on that connection (watch events too, keeping their
// order), is held back until release is called. applied is closed when the
// reply reached the proxy, that is once the server has applied the
// request. While it holds a reply the proxy answers the client's pings
// itself (the server's own answers come later and are ignored by clients),
// so a long hold does not look like a dead connection; the server still
// hears the pings and keeps the session. release is idempotent; called
// before the fault matched, it disarms it. If the connection ends first,
// applied may never close.
func (p *Proxy) HoldNextReply(op OpKind, pathPrefix string) (applied <-chan struct{}, release func()) {
	f := &proxyFault{ops: wireOpcodes[op], prefix: pathPrefix, applied: make(chan struct{}), release: make(chan struct{})}
	p.arm(f)
	return f.applied, func() {
		f.releaseOnce.Do(func() {
			p.mu.Lock()
			p.faults = slices.DeleteFunc(p.faults, func(g *proxyFault) bool { return g == f })
			p.mu.Unlock()
			close(f.release)
		})
	}
}

// ExpireSession ends, on the server, the last session that was established
// through the proxy, and returns once the server has deleted its ephemeral
// nodes. It keeps the client away meanwhile (Block), then cuts the proxy's
// connections and unblocks it (unless it was blocked before): the client
// reconnects, is told its session expired, and starts a new one. It fails
// if no session went through the proxy or the session is already gone.
func (p *Proxy) ExpireSession(ctx context.Context) error {
	p.mu.Lock()
	s, wasBlocked := p.sess, p.blocked
	p.mu.Unlock()
	if s.id == 0 {
		return errors.New("testkit: no session has gone through the proxy")
	}
	p.Block()
	err := closeWireSession(ctx, p.target, s)
	p.Cut()
	if !wasBlocked {
		p.Unblock()
	}
	return err
}

// Close closes the listener and every connection and waits for all the
// proxy's goroutines. Held replies are dropped.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		l := &proxyLink{p: p, client: c, done: make(chan struct{}), pending: map[int32]*proxyFault{}, rewatched: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go l.run()
	}
}

// proxyFault is one armed LoseNextReply or HoldNextReply.
type proxyFault struct {
	lose        bool // drop the reply and cut; otherwise hold it
	ops         []int32
	prefix      string
	applied     chan struct{} // closed when the reply reached the proxy
	release     chan struct{} // hold: closed by release
	releaseOnce sync.Once
}

func (p *Proxy) arm(f *proxyFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, f)
}

// match disarms the first fault matching req and ties it to req's xid on l.
// It runs before req is forwarded, so the reply cannot overtake it.
func (p *Proxy) match(l *proxyLink, req wireRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, f := range p.faults {
		if slices.Contains(f.ops, req.op) && strings.HasPrefix(req.path, f.prefix) {
			p.faults = slices.Delete(p.faults, i, i+1)
			l.mu.Lock()
			l.pending[req.xid] = f
			l.mu.Unlock()
			return
		}
	}
}

// waitOpen waits while the proxy is blocked. It returns false if l closed.
func (p *Proxy) waitOpen(l *proxyLink) bool {
	for {
		p.mu.Lock()
		blocked, unblocked := p.blocked, p.unblocked
		p.mu.Unlock()
		if !blocked {
			return true
		}
		select {
		case <-unblocked:
		case <-l.done:
			return false
		}
	}
}

// proxyLink is one client connection and its connection to the server.
type proxyLink struct {
	p      *Proxy
	client net.Conn
	done   chan struct{} // closed by close

	mu      sync.Mutex
	closed  bool
	server  net.Conn              // nil until dialled
	pending map[int32]*proxyFault // matched faults by request xid

	wmu     sync.Mutex  // one frame at a time to the client
	holding atomic.Bool // a reply is held: answer pings here

	// See resyncGrace.
	resumed   atomic.Bool   // the client's handshake resumed a session
	rewatched chan struct{} // closed once the client re-sent its watches
}

// resyncGrace bounds how long, after a client resumed its session, the
// proxy holds the server's frames back waiting for the client to re-send its
// watches. go-zookeeper v1.0.4 reads its last zxid for that setWatches
// request without synchronising with its receive loop, which updates it on
// every reply (upstream issue samuel/go-zookeeper#260): a reply arriving
// first is a data race, and -race fails the test. Once the client has
// written setWatches, its next read is ordered after it, so the proxy
// forwards replies only then; a client without watches sends none, and its
// replies wait this long.
const resyncGrace = 100 * time.Millisecond

func (l *proxyLink) run() {
	defer l.p.wg.Done()
	defer func() {
		l.close()
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	}()
	if !l.p.waitOpen(l) {
		return
	}
	srv, err := net.DialTimeout("tcp", l.p.target, 2*time.Second)
	if err != nil {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		srv.Close()
		return
	}
	l.server = srv
	l.mu.Unlock()
	requests := make(chan struct{})
	go func() {
		defer close(requests)
		l.forwardRequests(srv)
	}()
	l.forwardReplies(srv)
	<-requests
}

// close closes both connections; the forwarding loops then end.
func (l *proxyLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	l.client.Close()
	if l.server != nil {
		l.server.Close()
	}
}

// forwardRequests copies the client's frames to the server and ties armed
// faults to the requests they match.
func (l *proxyLink) forwardRequests(srv net.Conn) {
	defer l.close()
	r := bufio.NewReader(l.client)
	rewatched := false
	for first := true; ; first = false {
		frame, err := readWireFrame(r)
		if err != nil || !l.p.waitOpen(l) {
			return
		}
		req, ok := parseWireRequest(frame)
		switch {
		case first:
			l.resumed.Store(wireResumesSession(frame))
		case ok:
			if req.xid == wireXidPing && l.holding.Load() {
				if l.writeClient(wirePingReply) != nil {
					return
				}
			}
			l.p.match(l, req)
		}
		if _, err := srv.Write(frame); err != nil {
			return
		}
		if ok && !first && !rewatched && slices.Contains(wireOpSetWatches, req.op) {
			rewatched = true
			close(l.rewatched)
		}
	}
}

// forwardReplies copies the server's frames to the client, applying the
// fault tied to a reply's xid.
func (l *proxyLink) forwardReplies(srv net.Conn) {
	defer l.close()
	r := bufio.NewReader(srv)
	var resync *time.Timer // running while replies wait for setWatches
	defer func() {
		if resync != nil {
			resync.Stop()
		}
	}()
	for first := true; ; first = false {
		frame, err := readWireFrame(r)
		if err != nil {
			return
		}
		if resync != nil {
			select {
			case <-l.rewatched:
			case <-resync.C:
			case <-l.done:
				return
			}
			resync.Stop()
			resync = nil
		}
		if first {
			if s, ok := parseWireConnectResponse(frame); ok {
				l.p.mu.Lock()
				l.p.sess = s
				l.p.mu.Unlock()
				if l.resumed.Load() {
					resync = time.NewTimer(resyncGrace)
				}
			}
		} else if xid, ok := wireReplyXid(frame); ok {
			l.mu.Lock()
			f := l.pending[xid]
			delete(l.pending, xid)
			l.mu.Unlock()
			if f != nil {
				close(f.applied)
				if f.lose {
					return
				}
				l.holding.Store(true)
				select {
				case <-f.release:
				case <-l.done:
					return
				}
				l.holding.Store(false)
			}
		}
		if !l.p.waitOpen(l) || l.writeClient(frame) != nil {
			return
		}
	}
}

func (l *proxyLink) writeClient(frame []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_, err := l.client.Write(frame)
	return err
}
