// Package zk is the narrow ZooKeeper interface the recipes use (Conn, its
// session states, watch events and sentinel errors) and its implementation
// on github.com/go-zookeeper/zk v1.0.4 (Connect). No go-zookeeper type
// appears in its API; the in-memory simulator in package testkit/sim
// implements the same Conn.
//
//	conn, err := zk.Connect(ctx, []string{"127.0.0.1:2181"}, zk.WithSessionTimeout(10*time.Second))
//	if err != nil { ... }
//	defer conn.Close()
//	cancel := conn.Subscribe(func(ev zk.SessionEvent) { ... }) // SUSPENDED, RECONNECTED, LOST, ...
//
// # What the adapter absorbs of go-zookeeper
//
// Contexts. go-zookeeper takes no context and a request the server never
// answers waits until the connection breaks or is closed. Each Conn method
// runs its request on a goroutine and returns ctx.Err() when ctx ends first;
// the request still completes (a write may be applied) and its goroutine ends
// with it, at the latest when the Conn is closed. Close waits for all of
// them.
//
// Reconnecting. go-zookeeper pauses a fixed second, and fails every queued
// request with ErrNoServer, each time it has tried every server once; with a
// single server that is before every reconnect. The adapter's host provider
// redials at once after a connection is lost and backs off (exponentially,
// with jitter, capped; see WithReconnectBackoff) only while dials keep
// failing, so a connection cut with the session alive costs milliseconds.
// Requests made while disconnected wait in go-zookeeper's queue until a
// connection is back (or their ctx ends), and, when watches are re-sent,
// until they are (see below).
//
// Unanswered handshakes. go-zookeeper waits ten receive timeouts (6⅔
// session timeouts) for the server's reply to its handshake. ZooKeeper 3.8
// sometimes takes a connection while it is starting and never answers it,
// so a client could stay disconnected past its session's end. The adapter
// closes a connection whose handshake reply has not arrived within a third
// of the session timeout (at least a second), and dials again.
//
// Session states. go-zookeeper's event channel holds six events and drops
// the rest, and its states describe the TCP connection. The adapter ignores
// that channel, reads every state in go-zookeeper's event callback and maps
// it to Curator-style session states by comparing session ids (see
// SessionState): a lost connection is SUSPENDED, the same session back is
// RECONNECTED, an expiry or a different session id is LOST followed by
// CONNECTED for the new session, and Close is CLOSED.
//
// A new session after expiry. go-zookeeper opens a new session by itself
// once the old one expired, on the same connection. Requests queued while
// the expiry was not yet known can run on the new session: an ephemeral
// create issued under the old session may succeed, owned by the new one.
// Recipes therefore remember SessionID when they issue a request, compare it
// when the reply comes, and check a node's Stat.EphemeralOwner before they
// trust it is theirs.
//
// Errors. go-zookeeper's errors, and the server codes it does not map
// (RuntimeInconsistency and Unimplemented arrive as "unknown error: -2" and
// "-6"), become this package's sentinels, matched with errors.Is; the
// original text stays in the message. ErrConnectionClosed and ErrNoServer
// become ErrConnectionLoss (the outcome is unknown), ErrClosing ErrClosed.
//
// Watches. go-zookeeper's one-shot watch channels are forwarded to channels
// of WatchEvent that receive exactly one event and are closed; a watch that
// ends without a change (expiry, Close) delivers EventNotWatching with
// ErrSessionExpired or ErrClosed. Watches survive a reconnect with the same
// session: go-zookeeper re-registers them and the server reports what
// changed meanwhile.
//
// A data race in go-zookeeper at reconnect. When go-zookeeper resumes a
// session on a new connection it starts its send and receive loops and only
// then builds the setWatches request that re-registers its watches, reading
// its last zxid without synchronisation while the receive loop writes it for
// every reply (samuel/go-zookeeper#178 and #260, go-zookeeper/zk#35, all
// unfixed in v1.0.4). Any reply handled before setWatches is on the wire
// races with that read: replies to requests left in go-zookeeper's queue at
// the cut, issued while disconnected, or issued at RECONNECTED (which the
// adapter reports before go-zookeeper builds setWatches). Under -race that
// fails tests. The adapter guards the wire instead: its dialer wraps each
// connection and reads the frames go-zookeeper writes. After a handshake
// that resumes a session while the adapter counts a watch go-zookeeper may
// hold, request frames are acknowledged but held back until go-zookeeper
// writes setWatches; setWatches then goes out first and the held requests
// right after it, in order (the order the Java client uses). This holds back
// everything, including what was already in go-zookeeper's queue at the cut,
// and costs nothing else: calls take no extra step, the RECONNECTED event is
// not delayed, and requests wait only until setWatches is written, tens of
// microseconds to a millisecond. If no setWatches comes within 250 ms (the
// watches counted had just fired, or were requests not yet answered),
// go-zookeeper had none to re-send and read nothing, and the held requests
// go out then. A new session (first connect, or after expiry), or a
// resumed one without counted watches, holds nothing until its first watch
// request: only a watch armed on the new connection could make
// go-zookeeper read, so the requests after that one wait for setWatches
// or 10 ms, once per connection. What remains: a connection loop stalled
// longer than those waits (250 ms, 10 ms) before it builds setWatches
// would race when the hold ends.
//
// Paths and ops are validated before anything is sent (ValidatePath; a
// container create inside Multi is refused with ErrBadArguments, because
// go-zookeeper cannot read the server's reply to it).
//
// # Secured ensembles
//
//	servers, chroot, err := zk.ParseConnectString("zk1:2281,zk2:2281/apps/billing")
//	conn, err := zk.Connect(ctx, servers,
//		zk.WithAuth("digest", []byte("billing:s3cret")), // repeatable
//		zk.WithTLS(tlsConfig),                           // the servers' secureClientPort
//		zk.WithChroot(chroot),                           // every path is under it; created if missing
//	)
//
// Authentication. Each WithAuth is sent (addAuth) before Connect returns,
// and go-zookeeper re-sends every accepted one on each new connection and
// to the new session after an expiry, before any other request, so the
// identity survives faults and costs no request per operation. A scheme the
// server refuses (one it has no provider for) makes Connect return
// ErrAuthFailed at once. A wrong digest password is not refused: ZooKeeper
// takes it as another identity, so Connect succeeds and the first operation
// that needs the right identity fails with ErrNoAuth. Credentials and key
// material appear in no log line and no error text.
//
// The ACL of new nodes. Every node created without an ACL of its own (Create,
// or a nil ACL in CreateACL or a CreateOp) gets the connection's: WithACL's,
// or WithACLProvider's for its path; without either, a connection with
// WithAuth creates CreatorAll plus world read (only its identity may change
// or delete the node or create under it; anyone may read), and a connection
// without authentication keeps ZooKeeper's world:anyone with all
// permissions and logs one warning per connection (to WithLogger's logger)
// that its nodes are writable by anyone. A recipe's own WithACL (UseACL)
// overrides the connection's for that recipe's nodes. An operation an ACL
// refuses returns ErrNoAuth.
//
// TLS. WithTLS dials every server with TLS (ZooKeeper's secureClientPort,
// served by Netty); the TLS handshake must end within the handshake bound
// above. When every server has failed its TLS handshake (a wrong CA, a
// plain-text port), Connect returns that error, whose text names TLS, at
// once rather than when its ctx ends.
//
// Chroot. go-zookeeper has none; WithChroot's view adds the chroot to every
// path sent and takes it off every path returned (created names, Multi
// results, watch events, error texts), so two connections with different
// chroots never see each other's nodes. The client rewrites a watch
// event's path as it delivers it, so watch channels keep the server's
// order (see Watches).
//
// Wrap applies the same options, but those about dialling, to a Conn made
// elsewhere (the simulator's).
//
// SASL and Kerberos. go-zookeeper v1.0.4 cannot authenticate with SASL
// (ZooKeeper's sasl scheme, Kerberos or DIGEST-MD5 over SASL): its
// handshake has no SASL step. Use digest authentication over TLS (or, on
// a server configured for it, the x509 scheme with a client certificate in
// WithTLS's config), or a SASL-capable client (the Java client, Curator)
// for ensembles that require SASL.
package zk
