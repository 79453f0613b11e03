package zk

import (
	"fmt"
	"math"
	"time"

	"github.com/rs/zerolog"
)

// Option configures Connect.
type Option func(*config)

type config struct {
	sessionTimeout time.Duration
	logger         zerolog.Logger
	backoffBase    time.Duration
	backoffMax     time.Duration
}

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
	return cfg, nil
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

// zkLogger adapts zerolog to go-zookeeper's Logger interface.
type zkLogger struct{ l zerolog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Warn().Str("component", "go-zookeeper").Msgf(format, args...)
}
