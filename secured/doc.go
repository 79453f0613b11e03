// Package secured checks every recipe against secured ZooKeeper sessions
// (issue 35): each handle's WithACL, an ACL's refusal (zk.ErrNoAuth)
// through each recipe's calls, recipes used end to end by authenticated
// connections with the default ACL, the identity kept across a
// reconnect and an expiry, and a lock under two chroots at once. The
// tests run on the simulator, a real server, and a real server whose
// only client port is TLS ("zk-tls", testkit.NewTLSServerTarget). It has
// tests only.
package secured
