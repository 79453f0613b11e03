// Package proxy is a fault-injecting TCP proxy for ZooKeeper's client
// protocol: it sits between a client and a real server (Proxy) or every
// member of an ensemble (Ensemble) and cuts connections, turns into a black
// hole, loses or holds back the reply to a chosen request, and closes a
// chosen session on the server. It imports no testing package, so programs
// (benchmarks, demos) can use it; testkit's "zk" target drives it. With
// WithTLS it terminates TLS on both sides, so every fault works on a TLS
// connection too.
package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/testkit/fault"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one ZooKeeper server, for
// injecting network faults under a real client: cut connections, a black
// hole, a lost or a held-back reply. It reads ZooKeeper's framing, so reply
// faults pick one request by kind and path, and it always forwards whole
// frames. Every connection made to Addr gets its own connection to the
// server. Close ends it and all its goroutines.
type Proxy struct {
	target    string
	dialTLS   *tls.Config // nil: plain text to target
	listenTLS *tls.Config // nil: plain text to clients
	ln        net.Listener
	wg        sync.WaitGroup // the accept loop and every link

	mu        sync.Mutex
	closed    bool
	blocked   bool
	unblocked chan struct{} // closed by Unblock; a new one per Block
	links     map[*proxyLink]struct{}
	faults    []*fault.Reply        // armed, in arming order; some perhaps disarmed since
	sessions  map[int64]wireSession // every session the server handed out through us
}

// Option configures a Proxy (New) or every member of an Ensemble
// (NewEnsemble).
type Option func(*options)

type options struct {
	tls            bool
	listen, dialTo *tls.Config
}

// WithTLS makes the proxy terminate TLS on both sides: it accepts TLS
// connections with listen, which must hold a certificate that the clients
// trust (zkserver's Server.TLSServerConfig is the server's own), and
// dials the server's secure client port with dial, a client config
// (Server.TLSConfig: it trusts the server's CA; an empty ServerName is
// set to the target's host). Frames are plain text inside the proxy, so
// every fault works as on a plain-text connection; Cut closes the TCP
// connections under TLS, as a network failure would, without TLS's
// close_notify. ExpireSession's closeSession is sent with dial too. New
// refuses a nil config, or a listen config without a certificate, with an
// error matching zkrecipes.ErrInvalidOption. Default: plain text both
// ways.
func WithTLS(listen, dial *tls.Config) Option {
	return func(o *options) { o.tls, o.listen, o.dialTo = true, listen, dial }
}

func newOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.tls {
		if o.listen == nil || o.dialTo == nil {
			return o, fmt.Errorf("proxy: WithTLS with a nil config: %w", zkrecipes.ErrInvalidOption)
		}
		if len(o.listen.Certificates) == 0 && o.listen.GetCertificate == nil && o.listen.GetConfigForClient == nil {
			return o, fmt.Errorf("proxy: WithTLS's listen config has no certificate: %w", zkrecipes.ErrInvalidOption)
		}
	}
	return o, nil
}

// New starts a proxy on a free loopback port that forwards to target
// ("host:port").
func New(target string, opts ...Option) (*Proxy, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, links: map[*proxyLink]struct{}{}, sessions: map[int64]wireSession{}}
	if o.tls {
		p.listenTLS = o.listen.Clone()
		p.dialTLS = o.dialTo.Clone()
		if p.dialTLS.ServerName == "" {
			if host, _, err := net.SplitHostPort(target); err == nil {
				p.dialTLS.ServerName = host
			}
		}
	}
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
// the same session. The fault's Fired closes when the reply reached the
// proxy, that is once the server applied the request; Disarm disarms it.
func (p *Proxy) LoseNextReply(op fault.OpKind, pathPrefix string) *fault.Reply {
	f := fault.New(op, pathPrefix, false, nil)
	p.arm(f)
	return f
}

// HoldNextReply arms a one-shot fault: the next request of kind op whose
// path starts with pathPrefix is forwarded and applied, but its reply, and
// everything after it on that connection (watch events too, keeping their
// order), is held back until the fault's Release. Fired closes when the
// reply reached the proxy, that is once the server has applied the
// request. While it holds a reply the proxy answers the client's pings
// itself (the server's own answers come later and are ignored by clients),
// so a long hold does not look like a dead connection; the server still
// hears the pings and keeps the session. If the connection ends between
// the request and its reply, Fired never closes.
func (p *Proxy) HoldNextReply(op fault.OpKind, pathPrefix string) *fault.Reply {
	var f *fault.Reply
	f = fault.New(op, pathPrefix, true, func() {
		p.mu.Lock()
		p.faults = slices.DeleteFunc(p.faults, func(g *fault.Reply) bool { return g == f })
		p.mu.Unlock()
	})
	p.arm(f)
	return f
}

// ErrUnknownSession: ExpireSession was given a session that the server did
// not hand out through this proxy, so the proxy lacks its password.
var ErrUnknownSession = errors.New("proxy: the session did not go through this proxy")

// ErrSessionGone: ExpireSession found the session already gone on the
// server (expired or closed).
var ErrSessionGone = errors.New("proxy: the session is already gone")

// ExpireSession ends session id on the server, and returns once the server
// has deleted its ephemeral nodes. The session must have been established
// through the proxy (it fails with ErrUnknownSession otherwise), and with
// ErrSessionGone if it was gone already. It keeps the client away meanwhile
// (Block), then cuts the proxy's connections and unblocks it (unless it was
// blocked before): the client reconnects, is told its session expired, and
// starts a new one.
func (p *Proxy) ExpireSession(ctx context.Context, id int64) error {
	return expireSession(ctx, id, []*Proxy{p})
}

// expireSession ends session id, known to some of members, with all of
// them blocked meanwhile, then cuts them all and unblocks those that were
// not blocked before. It closes the session through the member that
// carries it, or else through each member that knows it in turn until one
// answers (a member's server may be down).
func expireSession(ctx context.Context, id int64, members []*Proxy) error {
	type via struct {
		target string
		tls    *tls.Config
		s      wireSession
	}
	var (
		vias       []via
		wasBlocked = make([]bool, len(members))
	)
	for i, p := range members {
		carries := p.Carries(id)
		p.mu.Lock()
		if s, ok := p.sessions[id]; ok {
			if carries {
				vias = append([]via{{p.target, p.dialTLS, s}}, vias...)
			} else {
				vias = append(vias, via{p.target, p.dialTLS, s})
			}
		}
		wasBlocked[i] = p.blocked
		p.mu.Unlock()
	}
	if len(vias) == 0 {
		return fmt.Errorf("%w: 0x%x", ErrUnknownSession, id)
	}
	for _, p := range members {
		p.Block()
	}
	var err error
	for _, v := range vias {
		err = closeWireSession(ctx, v.target, v.tls, v.s)
		if err == nil || errors.Is(err, ErrSessionGone) || ctx.Err() != nil {
			break
		}
	}
	for i, p := range members {
		p.Cut()
		if !wasBlocked[i] {
			p.Unblock()
		}
	}
	return err
}

// Carries reports whether a connection of session id goes through the
// proxy now.
func (p *Proxy) Carries(id int64) bool {
	p.mu.Lock()
	links := make([]*proxyLink, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		if l.session.Load() == id && !l.isClosed() {
			return true
		}
	}
	return false
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
		l := &proxyLink{p: p, client: c, clientTCP: c, done: make(chan struct{}), pending: map[int32]*fault.Reply{}, rewatched: make(chan struct{})}
		if p.listenTLS != nil {
			// The handshake happens on the link's first read or write:
			// not at all while the proxy is blocked.
			l.client = tls.Server(c, p.listenTLS)
		}
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

func (p *Proxy) arm(f *fault.Reply) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, f)
}

// match takes the first armed fault matching req and ties it to req's xid
// on l, dropping the matching faults disarmed since they were armed. It
// runs before req is forwarded, so the reply cannot overtake it.
func (p *Proxy) match(l *proxyLink, req wireRequest) {
	kind, ok := wireKinds[req.op]
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i < len(p.faults); i++ {
		f := p.faults[i]
		if !f.Matches(kind, req.path) {
			continue
		}
		p.faults = slices.Delete(p.faults, i, i+1)
		if f.Take() {
			l.mu.Lock()
			l.pending[req.xid] = f
			l.mu.Unlock()
			return
		}
		i--
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
	p         *Proxy
	client    net.Conn      // what frames are read from and written to: TLS or clientTCP
	clientTCP net.Conn      // the TCP connection under client
	done      chan struct{} // closed by close

	mu        sync.Mutex
	closed    bool
	serverTCP net.Conn               // the TCP connection to the server (under TLS with WithTLS); nil until dialled
	pending   map[int32]*fault.Reply // matched faults by request xid

	wmu     sync.Mutex   // one frame at a time to the client
	holding atomic.Bool  // a reply is held: answer pings here
	session atomic.Int64 // the session the server gave this connection; 0 before

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
	tcp, err := net.DialTimeout("tcp", l.p.target, 2*time.Second)
	if err != nil {
		return
	}
	srv := tcp
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		tcp.Close()
		return
	}
	l.serverTCP = tcp
	l.mu.Unlock()
	if l.p.dialTLS != nil {
		// close closes tcp, which ends a handshake in progress.
		tc := tls.Client(tcp, l.p.dialTLS)
		tcp.SetDeadline(time.Now().Add(2 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		tcp.SetDeadline(time.Time{})
		srv = tc
	}
	requests := make(chan struct{})
	go func() {
		defer close(requests)
		l.forwardRequests(srv)
	}()
	l.forwardReplies(srv)
	<-requests
}

// isClosed reports whether close was called: the link carries nothing
// any more, though its goroutines may not have ended yet.
func (l *proxyLink) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
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
	// The TCP connections, not TLS's: a cut sends no close_notify, and
	// nothing waits for a TLS write in progress.
	l.clientTCP.Close()
	if l.serverTCP != nil {
		l.serverTCP.Close()
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
				l.p.sessions[s.id] = s
				l.p.mu.Unlock()
				l.session.Store(s.id)
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
				f.MarkFired()
				if !f.Hold() {
					return
				}
				l.holding.Store(true)
				select {
				case <-f.Released():
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
