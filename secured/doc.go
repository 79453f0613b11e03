// Package secured checks every recipe against secured ZooKeeper sessions
// (issue 35): each handle's WithACL, an ACL's refusal (zk.ErrNoAuth)
// through each recipe's calls, and recipes used end to end by
// authenticated connections with the default ACL, on the simulator and a
// real server. It has tests only.
package secured
