package zkserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// ensembleSize is the number of servers in an Ensemble: the smallest that
// survives losing one.
const ensembleSize = 3

// Ensemble is a 3-server ZooKeeper ensemble on 127.0.0.1, each server a
// JVM with its own client, quorum and election ports. Servers are numbered
// 0, 1, 2 (ZooKeeper's myid is the number plus one).
type Ensemble struct {
	nodes []*zkProcess
	java  string
	cfg   config
	dir   string
	tls   *serverTLS // every member's; nil without WithTLS
	once  sync.Once  // Close's
}

// LaunchEnsemble starts a 3-server ensemble and returns once it serves.
// Close stops it and removes its data. WithPort and WithDataDir are
// refused: an ensemble has several ports and directories. With WithTLS
// every member has a secure client port (TLSAddrs), and with
// WithTLS(false) no plain-text one.
func LaunchEnsemble(ctx context.Context, opts ...Option) (*Ensemble, error) {
	cfg := newConfig(opts)
	if cfg.port != 0 || cfg.dataDir != "" {
		return nil, fmt.Errorf("zkserver: WithPort and WithDataDir are for a standalone server: %w", zkrecipes.ErrInvalidOption)
	}
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	if cfg.tls {
		for _, jar := range nettyClassPath {
			if _, err := os.Stat(jar); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrNotInstalled, err)
			}
		}
	}
	dir, err := os.MkdirTemp("", "zkrecipes-zk3-")
	if err != nil {
		return nil, err
	}
	var keys *serverTLS
	if cfg.tls {
		if keys, err = makeTLS(dir); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("zkserver: TLS key and certificate: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	e := &Ensemble{java: java, cfg: cfg, dir: dir, tls: keys}
	for i := range ensembleSize {
		e.nodes = append(e.nodes, &zkProcess{
			name:    fmt.Sprintf("ensemble server %d", i),
			dir:     filepath.Join(dir, fmt.Sprintf("node%d", i)),
			jvmArgs: jvmArguments(cfg),
			tls:     keys,
			noPlain: cfg.noPlain,
		})
	}
	for attempt := 1; ; attempt++ {
		err := e.start(ctx)
		if err == nil {
			return e, nil
		}
		bindFailed := false
		for _, n := range e.nodes {
			n.kill()
			bindFailed = bindFailed || n.bindFailed()
		}
		if attempt == 3 || !bindFailed {
			e.Close()
			return nil, err
		}
		for _, n := range e.nodes {
			os.RemoveAll(n.dir) // a fresh start, with new ports
		}
	}
}

// start configures every server with fresh ports, starts them all and
// waits until the ensemble serves.
func (e *Ensemble) start(ctx context.Context) error {
	ports, err := freePorts(4 * ensembleSize)
	if err != nil {
		return err
	}
	for i, n := range e.nodes {
		n.securePort = ports[3*ensembleSize+i]
	}
	var servers []string
	for i := range ensembleSize {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[ensembleSize+i], ports[2*ensembleSize+i]))
	}
	for i, n := range e.nodes {
		if err := n.writeConfig(e.cfg, ports[i], i+1, servers); err != nil {
			return err
		}
	}
	for _, n := range e.nodes {
		if err := n.start(e.java); err != nil {
			return err
		}
	}
	return e.WaitServing(ctx)
}

// Addrs are the client addresses of the servers, in order: the connect
// string of the ensemble. Nil with WithTLS(false): no plain-text ports.
func (e *Ensemble) Addrs() []string {
	if e.tls != nil && e.cfg.noPlain {
		return nil
	}
	addrs := make([]string, len(e.nodes))
	for i, n := range e.nodes {
		addrs[i] = n.addr
	}
	return addrs
}

// TLSAddrs are the secure client addresses of the servers, in order, with
// WithTLS; nil without it.
func (e *Ensemble) TLSAddrs() []string {
	if e.tls == nil {
		return nil
	}
	addrs := make([]string, len(e.nodes))
	for i, n := range e.nodes {
		addrs[i] = n.secureAddr
	}
	return addrs
}

// TLSConfig is a client config trusting the servers' CA, as
// Server.TLSConfig; nil without WithTLS. Each call returns a new copy.
func (e *Ensemble) TLSConfig() *tls.Config {
	if e.tls == nil {
		return nil
	}
	return e.tls.client.Clone()
}

// TLSServerConfig presents the servers' certificate, as
// Server.TLSServerConfig (for a proxy.Ensemble with proxy.WithTLS); nil
// without WithTLS. Each call returns a new copy.
func (e *Ensemble) TLSServerConfig() *tls.Config {
	if e.tls == nil {
		return nil
	}
	return e.tls.server.Clone()
}

// Kill kills server i with SIGKILL, as a crash would, and returns once it
// is gone. Its data stays for Restart.
func (e *Ensemble) Kill(i int) error {
	n, err := e.node(i)
	if err != nil {
		return err
	}
	n.kill()
	return nil
}

// Restart starts server i again with its data and ports (after Kill) and
// returns once it serves and the ensemble has a leader. It then syncs by a
// DIFF, which can leave it diverged (see RestartEmpty).
func (e *Ensemble) Restart(ctx context.Context, i int) error {
	n, err := e.node(i)
	if err != nil {
		return err
	}
	if err := n.start(e.java); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.startTimeout)
	defer cancel()
	return e.WaitServing(ctx)
}

// RestartEmpty starts server i again with its ports (after Kill) but
// without its transaction log and snapshots, and returns once it serves
// and the ensemble has a leader: it syncs from the leader with a full
// snapshot, as after a disk replaced. A member restarted with its data
// syncs by a DIFF, which ZooKeeper 3.8.0 can get wrong: the member then
// misses transactions it reports applied (ZOOKEEPER-4785), its digest
// stops matching the leader's (zk_digest_mismatches_count grows), and
// its clients read nodes deleted long before, such as ephemerals of
// closed sessions.
func (e *Ensemble) RestartEmpty(ctx context.Context, i int) error {
	n, err := e.node(i)
	if err != nil {
		return err
	}
	if n.wanted() {
		return fmt.Errorf("zkserver: server %d is running: Kill it first", i)
	}
	if err := os.RemoveAll(filepath.Join(n.dir, "data", "version-2")); err != nil {
		return err
	}
	return e.Restart(ctx, i)
}

// Leader returns the number of the server that leads now, asking each
// running server with `srvr`.
func (e *Ensemble) Leader(ctx context.Context) (int, error) {
	for i, n := range e.nodes {
		if !n.wanted() {
			continue
		}
		if mode, err := n.mode(ctx); err == nil && mode == "leader" {
			return i, nil
		}
	}
	return -1, errors.New("zkserver: the ensemble has no leader")
}

// WaitServing waits until every server that should run (all but those
// killed and not restarted) answers `srvr` with a Mode and one of them
// leads: the ensemble has a quorum and serves clients. It fails at once if
// such a server has exited by itself.
func (e *Ensemble) WaitServing(ctx context.Context) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		leaders, last := 0, error(nil)
		for _, n := range e.nodes {
			if !n.wanted() {
				continue
			}
			select {
			case <-n.exited():
				return fmt.Errorf("zkserver: %s exited by itself; log tail:\n%s", n.name, n.logTail(30))
			default:
			}
			mode, err := n.mode(ctx)
			if err != nil {
				last = fmt.Errorf("%s: %w", n.name, err)
				break
			}
			if mode == "leader" {
				leaders++
			}
		}
		if last == nil && leaders == 1 {
			return nil
		}
		if last == nil {
			last = fmt.Errorf("%d leaders", leaders)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zkserver: ensemble not serving: %w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// WaitSynced waits until the ensemble serves (see WaitServing) and every
// follower has applied all that the leader had applied when the wait
// began: a member restarted after Kill has finished its sync with the
// leader. ZooKeeper 3.8 can lose transactions it has committed when a
// member is killed while it syncs, or just after (ZOOKEEPER-4646,
// ZOOKEEPER-4643, ZOOKEEPER-4785); a test that kills members one after
// another and checks what clients saw waits for this between kills.
func (e *Ensemble) WaitSynced(ctx context.Context) error {
	if err := e.WaitServing(ctx); err != nil {
		return err
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		return err
	}
	target, err := e.nodes[leader].zxid(ctx)
	if err != nil {
		return err
	}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		behind := ""
		for i, n := range e.nodes {
			if !n.wanted() || i == leader {
				continue
			}
			if z, err := n.zxid(ctx); err != nil || z < target {
				behind = n.name
				break
			}
		}
		if behind == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zkserver: %s has not caught up with zxid %#x: %w", behind, target, ctx.Err())
		case <-tick.C:
		}
	}
}

// DigestMismatches is the sum over the running servers of ZooKeeper's
// digest_mismatches_count (mntr; each counts from its server's start):
// how many times a server found its data
// tree's digest differ from the one the leader computed for the same
// transaction. Above 0, the servers' copies of the data diverged: what
// clients saw may not be what was committed.
func (e *Ensemble) DigestMismatches(ctx context.Context) (int64, error) {
	var sum int64
	for _, n := range e.nodes {
		if !n.wanted() {
			continue
		}
		reply, err := n.fourLetterWord(ctx, "mntr")
		if err != nil {
			return 0, fmt.Errorf("%s: %w", n.name, err)
		}
		for _, line := range strings.Split(reply, "\n") {
			if v, ok := strings.CutPrefix(line, "zk_digest_mismatches_count\t"); ok {
				c, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: mntr: %q: %w", n.name, line, err)
				}
				sum += c
			}
		}
	}
	return sum, nil
}

// LogTail returns the last n lines of server i's log.
func (e *Ensemble) LogTail(i, n int) string {
	if i < 0 || i >= len(e.nodes) {
		return ""
	}
	return e.nodes[i].logTail(n)
}

// Close kills every server and removes their data. It is idempotent.
func (e *Ensemble) Close() (err error) {
	e.once.Do(func() {
		for _, n := range e.nodes {
			n.kill()
		}
		err = os.RemoveAll(e.dir)
	})
	return err
}

func (e *Ensemble) node(i int) (*zkProcess, error) {
	if i < 0 || i >= len(e.nodes) {
		return nil, fmt.Errorf("zkserver: no ensemble server %d (have 0..%d)", i, len(e.nodes)-1)
	}
	return e.nodes[i], nil
}
