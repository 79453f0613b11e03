package zk

import (
	"encoding/binary"
	"net"
	"time"
)

// handshakeTimeout bounds how long a new connection may go without the
// server's whole handshake reply before the dialer closes it, which makes
// go-zookeeper dial again.
//
// go-zookeeper waits ten receive timeouts (6⅔ session timeouts) for that
// reply, and has no deadline at all on its body once the length arrived. A
// server can accept a connection and never answer it: ZooKeeper 3.8, asked
// for a session while it is still loading its database, fails to close the
// connection (a NullPointerException in removeCnxn) and forgets it. A client
// that waits there outlives its session, and with a single server stays
// disconnected for over a minute. A third of the session timeout is the
// interval at which a connected client pings; it leaves two thirds of the
// session for further dials. The floor of a second keeps a slow server (a
// new session costs it a log write) from failing every handshake of a client
// with a very short session.
func handshakeTimeout(session time.Duration) time.Duration {
	return max(session/3, time.Second)
}

// handshakeGuard wraps a new connection and closes it if the first frame
// the server sends (the handshake reply) is not wholly read within the
// timeout. It counts what go-zookeeper reads, which it does from one
// goroutine at a time (its handshake, then its receive loop), so the
// counters need no lock.
type handshakeGuard struct {
	net.Conn
	timer *time.Timer

	header [4]byte
	got    int // bytes of the header read
	body   int // bytes of the body still to read, once the header is in
}

func newHandshakeGuard(conn net.Conn, timeout time.Duration) *handshakeGuard {
	g := &handshakeGuard{Conn: conn}
	g.timer = time.AfterFunc(timeout, func() { conn.Close() })
	return g
}

func (g *handshakeGuard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if !g.replyRead() {
		g.count(p[:n])
	}
	return n, err
}

// count follows the reply frame {length int32, body} through the bytes read
// and stops the timer at its end.
func (g *handshakeGuard) count(p []byte) {
	for len(p) > 0 && g.got < len(g.header) {
		g.header[g.got] = p[0]
		g.got++
		p = p[1:]
		if g.got == len(g.header) {
			g.body = int(binary.BigEndian.Uint32(g.header[:]))
		}
	}
	if g.got < len(g.header) {
		return
	}
	g.body -= min(len(p), g.body)
	if g.body == 0 {
		g.timer.Stop()
	}
}

// replyRead reports whether the whole handshake reply has been read.
func (g *handshakeGuard) replyRead() bool {
	return g.got == len(g.header) && g.body == 0
}

// Close stops the timer with the connection.
func (g *handshakeGuard) Close() error {
	g.timer.Stop()
	return g.Conn.Close()
}
