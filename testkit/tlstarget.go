package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"sync"
	"time"
)

// tlsLeg is one TLS leg of the "zk-tls" target (see NewTLSServerTarget): a
// listener on 127.0.0.1 that relays every connection it accepts to a
// connection of its own to target, byte for byte. With a server config it
// is the front: it speaks TLS to whoever dials it and plain text to
// target. With a client config it is the back: plain text in, TLS to
// target. A relay ends, both its connections closed, as soon as either
// side closes or fails: a Cut by the proxy reaches the client at once.
type tlsLeg struct {
	ln     net.Listener
	target string
	dial   *tls.Config // the back's config for target; nil for the front
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

func newTLSLeg(target string, server, client *tls.Config) (*tlsLeg, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if server != nil {
		ln = tls.NewListener(ln, server)
	}
	l := &tlsLeg{ln: ln, target: target, dial: client, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

func (l *tlsLeg) addr() string { return l.ln.Addr().String() }

func (l *tlsLeg) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		if !l.track(c) {
			return
		}
		l.wg.Add(1)
		go l.relay(c)
	}
}

// track adds c to the open connections, or closes it and returns false
// once the leg is closed.
func (l *tlsLeg) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *tlsLeg) untrack(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		delete(l.conns, c)
		c.Close()
	}
}

// relay connects in to a new connection to the target and copies both
// ways until one side ends.
func (l *tlsLeg) relay(in net.Conn) {
	defer l.wg.Done()
	d := net.Dialer{Timeout: 2 * time.Second}
	var (
		out net.Conn
		err error
	)
	if l.dial != nil {
		out, err = (&tls.Dialer{NetDialer: &d, Config: l.dial}).Dial("tcp", l.target)
	} else {
		out, err = d.Dial("tcp", l.target)
	}
	if err != nil || !l.track(out) {
		l.untrack(in)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	l.untrack(in, out) // the other copy ends on the closed connections
	<-done
}

// close closes the listener and every open connection, and waits for the
// leg's goroutines.
func (l *tlsLeg) close() {
	l.mu.Lock()
	l.closed = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	l.ln.Close()
	l.untrack(conns...)
	l.wg.Wait()
}

func closeLegs(legs []*tlsLeg) {
	for _, l := range legs {
		l.close()
	}
}

// frontTLS returns the front's server config, with a self-signed
// certificate for 127.0.0.1 made once per target, and a client config
// trusting it.
func (tg *serverTarget) frontTLS() (server, client *tls.Config, err error) {
	f := &tg.front
	f.once.Do(func() {
		var key *ecdsa.PrivateKey
		if key, f.err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); f.err != nil {
			return
		}
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "zkrecipes testkit zk-tls front"},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.Add(24 * time.Hour),
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		var der []byte
		if der, f.err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key); f.err != nil {
			return
		}
		var cert *x509.Certificate
		if cert, f.err = x509.ParseCertificate(der); f.err != nil {
			return
		}
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		f.server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
		f.client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	})
	if f.err != nil {
		return nil, nil, f.err
	}
	return f.server, f.client.Clone(), nil
}
