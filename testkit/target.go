package testkit

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Target is a ZooKeeper that behavioural tests run against: the simulator
// or a real server. The same test, run on every target, must pass on each;
// where they differ, one of them is wrong.
type Target interface {
	// Name is "sim" or the real server's kind ("zk").
	Name() string
	// Connect opens a new session, connected when it returns, closed at the
	// end of the test, with zk.Connect's options: authentication, chroot,
	// ACL and ACL provider apply on every target (the simulator's through
	// zk.Wrap); the dial options (TLS, session timeout, backoff) only where
	// there is a dial. The fault verbs take the returned Conn.
	Connect(t testing.TB, opts ...zk.Option) zk.Conn
	// Disconnect cuts c's connection and keeps it cut: c sees SUSPENDED and
	// its session stays alive on the server. Requests wait.
	Disconnect(t testing.TB, c zk.Conn)
	// Reconnect lets c connect again; it returns once c saw RECONNECTED.
	Reconnect(t testing.TB, c zk.Conn)
	// Expire makes c's session expire. It returns once c saw LOST (the
	// server has deleted the session's ephemerals) and c has a new session.
	Expire(t testing.TB, c zk.Conn)
	// LoseNextReply arms a one-shot fault on c: the next request of kind op
	// whose path starts with pathPrefix reaches the server and is applied,
	// but its reply is lost: the caller gets zk.ErrConnectionLoss, c sees
	// SUSPENDED and then, by itself, RECONNECTED with the same session. The
	// fault's Fired closes once the request was applied; Disarm disarms it
	// if no request has matched it yet.
	LoseNextReply(t testing.TB, c zk.Conn, op OpKind, pathPrefix string) *ReplyFault
	// HoldNextReply arms a one-shot fault on c: the next matching request is
	// applied by the server but its reply, and everything after it on c's
	// connection, is held back until the fault's Release (idempotent, and
	// called at the end of the test). The fault's Fired closes once the
	// request was applied.
	HoldNextReply(t testing.TB, c zk.Conn, op OpKind, pathPrefix string) *ReplyFault
}
