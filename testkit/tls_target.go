package testkit

import (
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
)

// ProxyOption configures NewProxy and NewEnsembleProxy (proxy.WithTLS).
type ProxyOption = proxy.Option

// errNoTLS: NewTLSProxy or NewTLSEnsembleProxy was given servers started
// without zkserver.WithTLS.
var errNoTLS = errors.New("testkit: the servers have no secure client port (start them with zkserver.WithTLS)")

// NewTLSProxy starts a Proxy that terminates TLS in front of srv's secure
// client port (srv started with zkserver.WithTLS). A client dials its Addr
// with zk.WithTLS(srv.TLSConfig()), as it would dial srv: the proxy
// presents srv's own certificate (srv.TLSServerConfig) and dials srv
// trusting its CA. Every fault (Cut, Block, LoseNextReply, HoldNextReply,
// ExpireSession) works as on a plain-text connection. It refuses a server
// without TLS with an error matching zkrecipes.ErrInvalidOption.
func NewTLSProxy(srv *Server) (*Proxy, error) {
	if srv.TLSAddr() == "" {
		return nil, fmt.Errorf("%w: %w", zkrecipes.ErrInvalidOption, errNoTLS)
	}
	return proxy.New(srv.TLSAddr(), proxy.WithTLS(srv.TLSServerConfig(), srv.TLSConfig()))
}

// NewTLSEnsembleProxy is NewTLSProxy for every member of e (started with
// zkserver.WithTLS): a client dials its Addrs with
// zk.WithTLS(e.TLSConfig()).
func NewTLSEnsembleProxy(e *Ensemble) (*EnsembleProxy, error) {
	if e.TLSAddrs() == nil {
		return nil, fmt.Errorf("%w: %w", zkrecipes.ErrInvalidOption, errNoTLS)
	}
	return proxy.NewEnsemble(e.TLSAddrs(), proxy.WithTLS(e.TLSServerConfig(), e.TLSConfig()))
}
