// Package zkflags holds the connection flags zkr, the demo and zkbench
// share, so that the three read a secured ensemble's settings the same way:
//
//	-zk host:port[,host:port...][/chroot]   ZooKeeper's own connect string
//	-tls-ca FILE     PEM CA certificates the servers' certificates must chain to
//	-tls-cert FILE   PEM client certificate (with -tls-key), for servers that ask for one
//	-tls-key FILE    PEM key of -tls-cert
//	ZKR_AUTH=scheme:credential   in the environment, e.g. digest:user:password
//
// Any -tls-* flag makes the connection speak TLS (with -tls-cert alone the
// system's roots verify the servers). The credential is read from the
// environment only: a command line is visible to every user of the machine
// (ps, /proc), an environment is not. It never appears in an error.
//
// Every value is checked by Parse before anything is dialled; a bad one is
// an error matching ErrUsage, which the commands turn into exit status 2.
package zkflags

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// AuthEnv names the environment variable holding "scheme:credential".
const AuthEnv = "ZKR_AUTH"

// ErrUsage is a bad flag value or a bad ZKR_AUTH.
var ErrUsage = errors.New("bad connection settings")

// Flags are the registered flags, read by Parse once the flag set is parsed.
type Flags struct {
	zk, tlsCA, tlsCert, tlsKey string
}

// Register adds -zk (with zkDefault and the usage text zkUsage, which the
// commands word differently), -tls-ca, -tls-cert and -tls-key to fs.
func Register(fs *flag.FlagSet, zkDefault, zkUsage string) *Flags {
	f := &Flags{}
	fs.StringVar(&f.zk, "zk", zkDefault, zkUsage)
	fs.StringVar(&f.tlsCA, "tls-ca", "", "TLS: PEM file of the CA certificates the servers' certificates must chain to (any -tls-* flag turns TLS on; the servers' secureClientPort)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS: PEM file of a client certificate, with -tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS: PEM file of -tls-cert's private key")
	return f
}

// ZK is -zk as given.
func (f *Flags) ZK() string { return f.zk }

// TLS reports whether any -tls-* flag was given.
func (f *Flags) TLS() bool { return f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" }

// Settings are the checked connection settings.
type Settings struct {
	Servers []string    // -zk's servers; nil when -zk is empty
	Chroot  string      // -zk's chroot; "" for none
	TLS     *tls.Config // nil without -tls-* flags
	Auth    *Auth       // ZKR_AUTH; nil when unset or empty
}

// Auth is one credential. Its String and GoString hide the secret, so no
// format verb prints it.
type Auth struct {
	Scheme string
	cred   []byte
}

// User is the part of a digest credential before its ':' (the identity's
// name, which may be shown), or "" for another scheme.
func (a Auth) User() string {
	if a.Scheme != "digest" {
		return ""
	}
	u, _, _ := bytes.Cut(a.cred, []byte(":"))
	return string(u)
}

func (a Auth) String() string   { return a.Scheme + ":<redacted>" }
func (a Auth) GoString() string { return a.String() }

// Describe says who the settings authenticate as, for a banner line:
// "digest user alice", "scheme ip", or "" without ZKR_AUTH.
func (s Settings) Describe() string {
	switch {
	case s.Auth == nil:
		return ""
	case s.Auth.Scheme == "digest":
		return "digest user " + s.Auth.User()
	}
	return "scheme " + s.Auth.Scheme
}

// Parse checks the flags and the credential getenv(AuthEnv) gives (pass
// os.Getenv), and returns the settings. An empty -zk gives no servers.
func (f *Flags) Parse(getenv func(string) string) (Settings, error) {
	var s Settings
	if f.zk != "" {
		servers, chroot, err := zk.ParseConnectString(f.zk)
		if err != nil {
			return s, fmt.Errorf("%w: -zk %q: %w", ErrUsage, f.zk, err)
		}
		s.Servers, s.Chroot = servers, chroot
	}
	auth, err := parseAuth(getenv(AuthEnv))
	if err != nil {
		return s, err
	}
	s.Auth = auth
	if s.TLS, err = f.tlsConfig(); err != nil {
		return s, err
	}
	return s, nil
}

// parseAuth reads "scheme:credential"; empty is none. The errors never
// repeat the value.
func parseAuth(v string) (*Auth, error) {
	if v == "" {
		return nil, nil
	}
	scheme, cred, ok := strings.Cut(v, ":")
	switch {
	case !ok || scheme == "":
		return nil, fmt.Errorf("%w: %s: want scheme:credential, e.g. digest:user:password", ErrUsage, AuthEnv)
	case cred == "":
		return nil, fmt.Errorf("%w: %s: scheme %q with an empty credential", ErrUsage, AuthEnv, scheme)
	case scheme == "digest":
		if user, _, ok := strings.Cut(cred, ":"); !ok || user == "" {
			return nil, fmt.Errorf("%w: %s: a digest credential is user:password", ErrUsage, AuthEnv)
		}
	}
	return &Auth{Scheme: scheme, cred: []byte(cred)}, nil
}

// tlsConfig builds the TLS configuration of the -tls-* flags, or nil.
func (f *Flags) tlsConfig() (*tls.Config, error) {
	if !f.TLS() {
		return nil, nil
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, fmt.Errorf("%w: -tls-cert and -tls-key go together", ErrUsage)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("%w: -tls-ca: %w", ErrUsage, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: -tls-ca %s: no PEM certificate in it", ErrUsage, f.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if f.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("%w: -tls-cert %s, -tls-key %s: %w", ErrUsage, f.tlsCert, f.tlsKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Options are the zk options of s: WithChroot, WithAuth and WithTLS, each
// when set. Connect takes them all; zk.Wrap (the simulator) ignores TLS.
func (s Settings) Options() []zk.Option {
	var opts []zk.Option
	if s.Chroot != "" {
		opts = append(opts, zk.WithChroot(s.Chroot))
	}
	if s.Auth != nil {
		opts = append(opts, zk.WithAuth(s.Auth.Scheme, s.Auth.cred))
	}
	if s.TLS != nil {
		opts = append(opts, zk.WithTLS(s.TLS))
	}
	return opts
}
