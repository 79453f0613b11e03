package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// The Sim checks ACLs as ZooKeeper 3.8's PrepRequestProcessor and
// FinalRequestProcessor do, with the server's two default authentication
// providers, digest and ip (no superuser, no SASL, no x509):
//
//   - create needs PermCreate on the parent, delete PermDelete on the
//     parent, set PermWrite, get and children PermRead, a multi's check
//     PermRead on its node; exists and sync need none;
//   - a node's ACL is fixed at its create: "auth" expands to every digest
//     identity of the creating session (InvalidACL when it has none), an
//     empty list, an unknown scheme or a malformed id is InvalidACL, which
//     our adapter reports as zk.ErrBadArguments;
//   - the checks come where the server makes them: create: the ACL, the
//     parent's existence, PermCreate, then the name; delete: the parent's
//     PermDelete before the node's existence and version; set, get,
//     children, check: the node's existence, then the permission;
//   - ephemeral deletion at a session's end and container reaping are the
//     server's own deletes: no ACL applies to them.

// localIP is the address every simulated client connects from: each
// session has the identity ip:127.0.0.1 beside its digests.
const localIP uint32 = 127<<24 | 1

// principal is who makes a request: its session and the digest identities
// its connection authenticated as (ZooKeeper's authInfo, with the implicit
// ip identity left out).
type principal struct {
	session int64
	digests []string
}

// worldAll is the ACL of a node created with none given (the connection's
// own, for a conn with no default) and of the built-in nodes but
// /zookeeper/config, which anyone may only read.
var (
	worldAll  = zk.WorldACL(zk.PermAll)
	worldRead = zk.WorldACL(zk.PermRead)
)

// fixupACL returns the ACL a node created by who with acl gets, or
// InvalidACL (as zk.ErrBadArguments) as ZooKeeper's fixupACL decides it.
// nil is worldAll.
func fixupACL(path string, acl []zk.ACL, who principal) ([]zk.ACL, error) {
	if acl == nil {
		return worldAll, nil
	}
	invalid := fmt.Errorf("%w: invalid ACL for %s", zk.ErrBadArguments, path)
	if len(acl) == 0 {
		return nil, invalid
	}
	var out []zk.ACL
	for _, a := range acl {
		switch {
		case a.Scheme == "world" && a.ID == "anyone":
			out = append(out, a)
		case a.Scheme == "auth":
			if len(who.digests) == 0 {
				return nil, invalid
			}
			for _, id := range who.digests {
				out = append(out, zk.ACL{Perms: a.Perms, Scheme: "digest", ID: id})
			}
		case a.Scheme == "digest" && validDigestID(a.ID), a.Scheme == "ip" && validIPID(a.ID):
			out = append(out, a)
		default:
			return nil, invalid
		}
	}
	return out, nil
}

// validDigestID is DigestAuthenticationProvider.isValid: the id splits into
// exactly two parts at ':', Java's split dropping trailing empty parts.
func validDigestID(id string) bool {
	parts := strings.Split(id, ":")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return len(parts) == 2
}

// validIPID is IPAuthenticationProvider.isValid in 3.8: a dotted IPv4
// address (3.8 knows no IPv6 here), optionally with a prefix length of 0
// to 32.
func validIPID(id string) bool {
	_, _, ok := ipID(id)
	return ok
}

// ipID parses an ip ACL id: its address and prefix length (32 when none is
// given).
func ipID(id string) (uint32, int, bool) {
	addr, bitsText, masked := strings.Cut(id, "/")
	parts := strings.Split(addr, ".")
	if len(parts) != 4 {
		return 0, 0, false
	}
	var ip uint32
	for _, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 255 {
			return 0, 0, false
		}
		ip = ip<<8 | uint32(v)
	}
	bits := 32
	if masked {
		n, err := strconv.Atoi(bitsText)
		if err != nil || n < 0 || n > 32 {
			return 0, 0, false
		}
		bits = n
	}
	return ip, bits, true
}

// allowed reports whether who may do perm on a node with acl, as
// ZooKeeperServer.checkACL decides: an empty ACL allows everything, an
// entry allows when it has perm and names anyone, one of who's digests or
// who's address.
func allowed(acl []zk.ACL, perm int32, who principal) bool {
	if len(acl) == 0 {
		return true
	}
	return slices.ContainsFunc(acl, func(a zk.ACL) bool {
		if a.Perms&perm == 0 {
			return false
		}
		switch a.Scheme {
		case "world":
			return a.ID == "anyone"
		case "digest":
			return slices.Contains(who.digests, a.ID)
		case "ip":
			ip, bits, ok := ipID(a.ID)
			mask := ^uint32(0) << (32 - bits) // a shift by 32 is 0 in Go
			return ok && ip&mask == localIP&mask
		}
		return false
	})
}

// checkPerm returns zk.ErrNoAuth unless who may do perm on n.
func checkPerm(n *node, perm int32, who principal, path string) error {
	if !allowed(n.acl, perm, who) {
		return fmt.Errorf("%w: %s", zk.ErrNoAuth, path)
	}
	return nil
}

// frameACL is the size of acl in a create request as go-zookeeper encodes
// it: nil goes as the world ACL.
func frameACL(acl []zk.ACL) int {
	if acl == nil {
		acl = worldAll
	}
	n := 4
	for _, a := range acl {
		n += 4 + frameString(a.Scheme) + frameString(a.ID)
	}
	return n
}
