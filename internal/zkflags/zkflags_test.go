package zkflags

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parse registers the flags on a new set, parses args and reads ZKR_AUTH
// from auth.
func parse(t *testing.T, auth string, args ...string) (Settings, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f := Register(fs, "", "servers")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Parse(func(k string) string {
		if k != AuthEnv {
			t.Errorf("Parse read $%s", k)
		}
		return auth
	})
}

func TestConnectString(t *testing.T) {
	tests := []struct {
		name, zk string
		servers  []string
		chroot   string
	}{
		{"empty", "", nil, ""},
		{"one server", "127.0.0.1:2181", []string{"127.0.0.1:2181"}, ""},
		{"servers and a chroot", "zk1:2281,zk2:2281/apps/billing", []string{"zk1:2281", "zk2:2281"}, "/apps/billing"},
		{"the root is no chroot", "zk1:2181/", []string{"zk1:2181"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parse(t, "", "-zk", tt.zk)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Servers, tt.servers) || s.Chroot != tt.chroot {
				t.Errorf("servers %q chroot %q, want %q %q", s.Servers, s.Chroot, tt.servers, tt.chroot)
			}
			if s.Auth != nil || s.TLS != nil {
				t.Errorf("auth %v, TLS %v without ZKR_AUTH or -tls-*", s.Auth, s.TLS)
			}
			if got, want := len(s.Options()), min(len(tt.chroot), 1); got != want {
				t.Errorf("%d options, want %d", got, want)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	s, err := parse(t, "digest:alice:s3cret:with:colons")
	if err != nil {
		t.Fatal(err)
	}
	if s.Auth == nil || s.Auth.Scheme != "digest" || string(s.Auth.cred) != "alice:s3cret:with:colons" || s.Auth.User() != "alice" {
		t.Fatalf("auth %#v", s.Auth)
	}
	if got := s.Describe(); got != "digest user alice" {
		t.Errorf("Describe() = %q", got)
	}
	if len(s.Options()) != 1 {
		t.Errorf("%d options, want WithAuth", len(s.Options()))
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, x := range []any{s, &s, s.Auth, *s.Auth} {
			if out := fmt.Sprintf(verb, x); strings.Contains(out, "s3cret") {
				t.Errorf("%s of %T shows the password: %s", verb, x, out)
			}
		}
	}
	s, err = parse(t, "ip:127.0.0.1")
	if err != nil || s.Describe() != "scheme ip" || s.Auth.User() != "" {
		t.Errorf("ip: %v, %q", err, s.Describe())
	}
}

// Every bad value is ErrUsage, and no error repeats the credential.
func TestBadValues(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, cert, key := writeCerts(t, dir)
	tests := []struct {
		name, auth string
		args       []string
	}{
		{"a relative chroot", "", []string{"-zk", "zk1:2181,zk2:2181/apps/"}},
		{"an empty path segment", "", []string{"-zk", "zk1:2181/a//b"}},
		{"an empty server", "", []string{"-zk", "zk1:2181,,zk2:2181"}},
		{"no scheme", ":s3cret", nil},
		{"no colon", "s3cret", nil},
		{"an empty credential", "digest:", nil},
		{"a digest without a password", "digest:s3cret", nil},
		{"a digest without a user", "digest::s3cret", nil},
		{"-tls-cert without -tls-key", "", []string{"-tls-cert", cert}},
		{"-tls-key without -tls-cert", "", []string{"-tls-ca", ca, "-tls-key", key}},
		{"a missing CA file", "", []string{"-tls-ca", filepath.Join(dir, "nope.pem")}},
		{"a CA file without a certificate", "", []string{"-tls-ca", notPEM}},
		{"a key that is not PEM", "", []string{"-tls-cert", cert, "-tls-key", notPEM}},
		{"a key of another certificate", "", []string{"-tls-cert", ca, "-tls-key", key}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.auth, tt.args...)
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("err %v, want ErrUsage", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the credential: %v", err)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	ca, cert, key := writeCerts(t, t.TempDir())
	s, err := parse(t, "", "-zk", "zk1:2281", "-tls-ca", ca, "-tls-cert", cert, "-tls-key", key)
	if err != nil {
		t.Fatal(err)
	}
	if s.TLS == nil || s.TLS.RootCAs == nil || len(s.TLS.Certificates) != 1 {
		t.Fatalf("TLS config %+v", s.TLS)
	}
	if len(s.Options()) != 1 {
		t.Errorf("%d options, want WithTLS", len(s.Options()))
	}
	s, err = parse(t, "", "-tls-ca", ca)
	if err != nil || s.TLS == nil || s.TLS.Certificates != nil {
		t.Errorf("-tls-ca alone: %v, %+v", err, s.TLS)
	}
}

// writeCerts writes a CA certificate and a client certificate it signed,
// with the client's key, as PEM files in dir.
func writeCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caTmpl, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("client.pem", "CERTIFICATE", clientDER), write("client.key", "PRIVATE KEY", keyDER)
}
