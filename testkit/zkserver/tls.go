package zkserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// WithTLS gives a standalone server a secure client port (ZooKeeper's
// secureClientPort, served by Netty, ssl.clientAuth=none) with a key and
// certificate made for it at launch by a CA of its own, in PEM key and
// trust stores in its directory. With plain false it has no plain-text
// client port: Addr is "" and everything, srvr included, goes over TLS.
// TLSAddr and TLSConfig tell clients where and what to trust;
// TLSServerConfig lets a proxy in front of it present the same
// certificate. For LaunchEnsemble every member gets a secure client port,
// all with one certificate and CA (the quorum's own ports stay plain
// text). Default: no TLS.
func WithTLS(plain bool) Option {
	return func(c *config) { c.tls, c.noPlain = true, !plain }
}

// WithSuperUser makes user, with password, ZooKeeper's super user (the
// DigestAuthenticationProvider's superDigest): a session that authenticated
// as digest "user:password" passes every ACL. Tests use it to clean up
// nodes whose ACL shuts everyone else out. Default: none.
func WithSuperUser(user, password string) Option {
	return func(c *config) { c.superDigest = digestID(user, password) }
}

// digestID is ZooKeeper's digest id user:base64(sha1("user:password")).
func digestID(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// serverTLS is what a server with WithTLS serves and what its clients
// trust.
type serverTLS struct {
	keyStore, trustStore string      // PEM files in the server's directory
	client               *tls.Config // RootCAs: the server's CA
	server               *tls.Config // Certificates: the server's key and certificate
}

// makeTLS writes a CA, and a key and certificate for 127.0.0.1 and
// localhost signed by it, into dir as PEM key and trust stores.
func makeTLS(dir string) (*serverTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "zkrecipes test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "zookeeper"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	keyStore := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	s := &serverTLS{
		keyStore:   filepath.Join(dir, "keystore.pem"),
		trustStore: filepath.Join(dir, "truststore.pem"),
	}
	if err := os.WriteFile(s.keyStore, keyStore, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.trustStore, caPEM, 0o644); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	s.client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	s.server = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der, caDER}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
	}
	return s, nil
}

// configLines are the zoo.cfg lines of the secure port.
func (s *serverTLS) configLines(port int) string {
	return fmt.Sprintf("secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n"+
		"ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n"+
		"ssl.trustStore.location=%s\nssl.trustStore.type=PEM\nssl.clientAuth=none\n",
		port, s.keyStore, s.trustStore)
}
