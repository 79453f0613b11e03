package zk

import (
	"crypto/sha1"
	"encoding/base64"
)

// Perm is a set of ZooKeeper permissions on one node.
type Perm int32

// The permissions ZooKeeper checks. Creating and deleting a node need
// PermCreate and PermDelete on its parent; reading its data or its children
// needs PermRead on it, setting its data PermWrite. Exists needs none.
const (
	PermRead Perm = 1 << iota
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
	Perms  Perm
	Scheme string
	ID     string
}

// WorldACL is the list granting perms to anyone.
func WorldACL(perms Perm) []ACL { return []ACL{{Perms: perms, Scheme: "world", ID: "anyone"}} }

// CreatorAll is the list granting every permission to the identities of
// the session that creates the node, and nothing to anyone else. A session
// that has not authenticated cannot create a node with it.
func CreatorAll() []ACL { return []ACL{{Perms: PermAll, Scheme: "auth"}} }

// DigestACL is the list granting perms to the digest identity user with
// password, hashed as ZooKeeper hashes it: the password is not stored.
func DigestACL(perms Perm, user, password string) []ACL {
	return []ACL{{Perms: perms, Scheme: "digest", ID: DigestID(user, password)}}
}

// DigestID is the id a session that authenticated with digest
// "user:password" has on the server: user:base64(sha1("user:password")).
func DigestID(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}
