package proxy

import (
	"context"
	"errors"
)

// Ensemble is one Proxy per member of a ZooKeeper ensemble, driven as one:
// a client given Addrs as its server list reaches every member through it,
// whichever it connects to, and the faults apply to the whole ensemble.
// Close ends every member's proxy.
type Ensemble struct {
	members []*Proxy
}

// NewEnsemble starts one Proxy per member address ("host:port"), in
// order, each with opts (WithTLS: the members' secure client ports).
func NewEnsemble(members []string, opts ...Option) (*Ensemble, error) {
	if len(members) == 0 {
		return nil, errors.New("proxy: an ensemble needs at least one member")
	}
	if _, err := newOptions(opts); err != nil {
		return nil, err
	}
	e := &Ensemble{}
	for _, m := range members {
		p, err := New(m, opts...)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.members = append(e.members, p)
	}
	return e, nil
}

// Addrs are the addresses a client dials instead of the members', in the
// members' order: the connect string of the proxied ensemble.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.members))
	for i, p := range e.members {
		addrs[i] = p.Addr()
	}
	return addrs
}

// Member returns the proxy in front of member i (in NewEnsemble's order),
// for faults aimed at one member, such as a reply fault on the member that
// carries a session (see Carrier). It panics if there is no member i.
func (e *Ensemble) Member(i int) *Proxy { return e.members[i] }

// Carrier returns the member whose proxy carries a connection of session
// id now, and false if none does (the client is between connections).
func (e *Ensemble) Carrier(id int64) (member int, ok bool) {
	for i, p := range e.members {
		if p.Carries(id) {
			return i, true
		}
	}
	return -1, false
}

// Cut cuts every member's connections (see Proxy.Cut).
func (e *Ensemble) Cut() {
	for _, p := range e.members {
		p.Cut()
	}
}

// Block turns every member's proxy into a black hole (see Proxy.Block): the
// client reaches no member, and the ensemble expires its sessions after
// their timeout.
func (e *Ensemble) Block() {
	for _, p := range e.members {
		p.Block()
	}
}

// Unblock ends Block on every member.
func (e *Ensemble) Unblock() {
	for _, p := range e.members {
		p.Unblock()
	}
}

// ExpireSession ends session id on the ensemble, as Proxy.ExpireSession
// does for one server, with every member blocked meanwhile so that the
// client cannot take the session back through another one. The session
// must have been established through one of the members' proxies. It
// returns once the member that closed the session has deleted its
// ephemeral nodes; a session reading from another member may still see
// them until that member catches up (Sync first to be sure).
func (e *Ensemble) ExpireSession(ctx context.Context, id int64) error {
	return expireSession(ctx, id, e.members)
}

// Close closes every member's proxy.
func (e *Ensemble) Close() error {
	var errs []error
	for _, p := range e.members {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
