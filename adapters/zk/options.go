package zk

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"math"
	"time"

	"github.com/rs/zerolog"
)

// Option configures Connect and Wrap.
type Option func(*config)

type config struct {
	sessionTimeout time.Duration
	logger         zerolog.Logger
	backoffBase    time.Duration
	backoffMax     time.Duration

	// Dial-only: Wrap ignores them.
	tls    *tls.Config
	tlsSet bool

	auth     []credential
	chroot   string
	acl      []ACL
	aclSet   bool
	provider func(path string) []ACL
}

// credential is one WithAuth. Its String hides the secret, so that no
// format verb can print it.
type credential struct {
	scheme string
	cred   []byte
}

func (c credential) String() string { return c.scheme + ":<redacted>" }

func newConfig(opts []Option) (config, error) {
	cfg := config{
		sessionTimeout: 10 * time.Second,
		logger:         zerolog.Nop(),
		backoffBase:    10 * time.Millisecond,
		backoffMax:     time.Second,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.sessionTimeout < time.Millisecond || cfg.sessionTimeout > math.MaxInt32*time.Millisecond {
		return cfg, fmt.Errorf("%w: session timeout %v", ErrBadArguments, cfg.sessionTimeout)
	}
	if cfg.backoffBase <= 0 || cfg.backoffMax < cfg.backoffBase {
		return cfg, fmt.Errorf("%w: reconnect backoff %v..%v", ErrBadArguments, cfg.backoffBase, cfg.backoffMax)
	}
	if cfg.tlsSet && cfg.tls == nil {
		return cfg, fmt.Errorf("%w: WithTLS(nil)", ErrInvalidOption)
	}
	for _, a := range cfg.auth {
		if a.scheme == "" {
			return cfg, fmt.Errorf("%w: WithAuth with an empty scheme", ErrInvalidOption)
		}
		if a.scheme == "digest" {
			if err := validDigest(a.cred); err != nil {
				return cfg, err
			}
		}
	}
	if cfg.chroot != "" {
		if err := ValidatePath(cfg.chroot); err != nil {
			return cfg, fmt.Errorf("%w: WithChroot: %w", ErrInvalidOption, err)
		}
		if cfg.chroot == "/" {
			cfg.chroot = ""
		}
	}
	if cfg.aclSet {
		if err := ValidateACL(cfg.acl); err != nil {
			return cfg, fmt.Errorf("WithACL: %w", err)
		}
		if needsAuth(cfg.acl) && len(cfg.auth) == 0 {
			return cfg, fmt.Errorf("%w: WithACL: an \"auth\" entry (CreatorAll) needs WithAuth", ErrInvalidOption)
		}
	}
	return cfg, nil
}

// validDigest refuses a digest credential that is not "user:password"
// with a non-empty user, without repeating it.
func validDigest(cred []byte) error {
	user, _, ok := bytes.Cut(cred, []byte(":"))
	if !ok || len(user) == 0 {
		return fmt.Errorf("%w: WithAuth: digest credentials must be \"user:password\"", ErrInvalidOption)
	}
	return nil
}

// WithSessionTimeout sets the session timeout asked of the server. The
// server clamps it to its own [minSessionTimeout, maxSessionTimeout]
// (2 and 20 ticks unless configured). A dead connection is noticed after
// two thirds of the negotiated timeout. Default 10 s; it must be at least
// 1 ms and fit in 31 bits of milliseconds.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.sessionTimeout = d }
}

// WithLogger routes go-zookeeper's own log lines (failed dials, broken
// connections, failed handshakes) to l, at warn level with the field
// component=go-zookeeper. Its informational lines are switched off.
// Default zerolog.Nop(): nothing is logged.
func WithLogger(l zerolog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithReconnectBackoff sets how long the connection waits between dial
// attempts once a whole pass over the servers has failed: base after the
// first failed pass, doubling with each further one up to max, each delay
// drawn at random from its upper half. Redialling after a connection is lost
// is always immediate. Defaults 10 ms and 1 s; base must be positive and max
// at least base.
func WithReconnectBackoff(base, max time.Duration) Option {
	return func(c *config) { c.backoffBase, c.backoffMax = base, max }
}

// WithAuth authenticates the session with scheme and cred (ZooKeeper's
// addAuth) before Connect or Wrap returns; "digest" takes "user:password"
// (anything else is refused before anything is sent). It may be given more
// than once: the session then has every identity. go-zookeeper re-sends
// every accepted credential on each new connection, and on the new session
// after an expiry, before any other request, so the identity survives
// faults. A credential the server refuses (an unknown scheme) makes Connect
// fail with ErrAuthFailed. A wrong digest password is not refused: it is
// another identity, and the first operation on nodes of the right one
// fails with ErrNoAuth. With WithAuth and no ACL option, nodes are created
// with CreatorAll plus world read (see WithACL). cred is never logged nor
// put in an error.
func WithAuth(scheme string, cred []byte) Option {
	cred = bytes.Clone(cred)
	return func(c *config) { c.auth = append(c.auth, credential{scheme, cred}) }
}

// WithTLS makes Connect speak TLS to the servers, which must listen on a
// secure client port (ZooKeeper's secureClientPort, Netty). An empty
// ServerName in cfg is set to each server's host. A server whose TLS
// handshake fails, or a plain-text server, is an error naming TLS: Connect
// returns it once a whole pass over the servers has failed that way. nil is
// refused. Wrap ignores it: the Conn it is given is dialled already.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls, c.tlsSet = cfg, true }
}

// WithChroot roots every path of the connection at path, as ZooKeeper's
// connect string "host:port/path" does: the Conn's "/" is path on the
// server, and every path it takes or returns (created names, Multi results,
// watch events) is relative to it. Connect and Wrap create path if it is
// missing (and its missing ancestors, as containers) with the connection's
// ACL for "/": with the default ACL of an authenticated connection, other
// identities cannot then create beside them, so create shared parents
// (such as /apps) beforehand. path must be absolute (ValidatePath); "/"
// means no chroot. Default: none.
func WithChroot(path string) Option {
	return func(c *config) { c.chroot = path }
}

// WithACL sets the ACL of every node the connection creates without one
// (Create, and CreateACL or a CreateOp with a nil ACL); a recipe's own
// WithACL overrides it for that recipe's nodes. It must pass ValidateACL;
// an "auth" entry (CreatorAll) needs WithAuth.
//
// Without WithACL or WithACLProvider the default is safe: a connection
// with WithAuth creates its nodes with CreatorAll plus WorldACL(PermRead)
// (its identity may do everything, others may read); one without
// authentication creates them world:anyone with all permissions, and logs
// one warning saying so.
func WithACL(acl ...ACL) Option {
	acl = append([]ACL(nil), acl...)
	return func(c *config) { c.acl, c.aclSet = acl, true }
}

// WithACLProvider sets a function choosing the ACL of each node the
// connection creates without one, by its path (relative to the chroot, and
// for a sequential node the prefix asked for), as Curator's ACLProvider.
// A nil or empty result means what the connection would use without it
// (WithACL, or the default described there). A result that fails
// ValidateACL fails the create before anything is sent.
func WithACLProvider(fn func(path string) []ACL) Option {
	return func(c *config) { c.provider = fn }
}

// zkLogger adapts zerolog to go-zookeeper's Logger interface.
type zkLogger struct{ l zerolog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Warn().Str("component", "go-zookeeper").Msgf(format, args...)
}
