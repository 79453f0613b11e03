package zk

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
)

// The permissions ZooKeeper checks. Creating and deleting a node need
// PermCreate and PermDelete on its parent; reading its data or its children
// needs PermRead on it, setting its data PermWrite. Exists needs none.
const (
	PermRead int32 = 1 << iota
	PermWrite
	PermCreate
	PermDelete
	PermAdmin
	PermAll = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// ACL is one entry of a node's access control list: the identity ID of
// scheme Scheme may do Perms. The schemes a server knows by default are
// "world" (ID "anyone"), "auth" (every identity the creating session has
// authenticated as; ID empty), "digest" (ID "user:base64(sha1(user:password))")
// and "ip".
type ACL struct {
	Perms  int32 // PermRead | PermWrite | ...
	Scheme string
	ID     string
}

// WorldACL is the list granting perms to anyone.
func WorldACL(perms int32) []ACL { return []ACL{{Perms: perms, Scheme: "world", ID: "anyone"}} }

// CreatorAll is the list granting every permission to the identities of
// the session that creates the node, and nothing to anyone else. A session
// that has not authenticated cannot create a node with it.
func CreatorAll() []ACL { return []ACL{{Perms: PermAll, Scheme: "auth"}} }

// DigestACL is the list granting perms to the digest identity user with
// password, hashed as ZooKeeper hashes it: the password is not stored.
func DigestACL(perms int32, user, password string) []ACL {
	return []ACL{{Perms: perms, Scheme: "digest", ID: DigestID(user, password)}}
}

// DigestID is the id a session that authenticated with digest
// "user:password" has on the server: user:base64(sha1("user:password")).
func DigestID(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// ValidateACL reports, as an error matching ErrInvalidOption, why the
// server would refuse acl or why it grants nothing: an empty list, an entry
// without permissions or with bits beyond PermAll, an empty scheme, a
// "world" entry whose ID is not "anyone", a "digest" entry whose ID is not
// "user:hash". Recipes call it for their WithACL options; Connect and Wrap
// for WithACL.
func ValidateACL(acl []ACL) error {
	if len(acl) == 0 {
		return fmt.Errorf("%w: an empty ACL", ErrInvalidOption)
	}
	for i, a := range acl {
		bad := func(why string) error { return fmt.Errorf("%w: ACL entry %d: %s", ErrInvalidOption, i, why) }
		switch {
		case a.Perms == 0:
			return bad("no permissions")
		case a.Perms&^PermAll != 0:
			return bad(fmt.Sprintf("unknown permission bits %#x", int32(a.Perms&^PermAll)))
		case a.Scheme == "":
			return bad("no scheme")
		case a.Scheme == "world" && a.ID != "anyone":
			return bad(fmt.Sprintf("world scheme with id %q (only \"anyone\")", a.ID))
		case a.Scheme == "digest" && !strings.Contains(a.ID, ":"):
			return bad("digest id is not user:hash")
		}
	}
	return nil
}

// needsAuth reports whether acl has an "auth" entry, which only a session
// with an identity can create nodes with.
func needsAuth(acl []ACL) bool {
	return slices.ContainsFunc(acl, func(a ACL) bool { return a.Scheme == "auth" })
}
