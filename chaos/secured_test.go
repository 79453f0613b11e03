package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// The secured worker group (issue 35): the lock workers of lock path
// securedLock connect over TLS, to the members' secure client ports
// through TLS-terminating proxies of their own (so every fault reaches
// them as it reaches the rest), authenticate as securedAuth and work
// under securedChroot; their recipes create every node with the default
// ACL of an authenticated connection (CreatorAll plus world read). An
// intruder of another identity, through a plain-text proxy and without
// the chroot, tries to delete, overwrite and create under the group's
// nodes all along: every attempt that the server does not refuse is a
// violation. Only the real ensemble runs it (runSuite); the simulator's
// runs keep every lock path plain.
const (
	securedChroot = "/secured"
	securedAuth   = "chaos:chaos-secret"
	intruderAuth  = "intruder:intruder-secret"
	securedLock   = lockPaths - 1 // the lock path whose workers are the group
)

// access is how a client reaches the ensemble.
type access int

const (
	plainAccess    access = iota // plain text, no identity, no chroot
	securedAccess                // TLS, securedAuth, securedChroot
	intruderAccess               // plain text, intruderAuth, no chroot
)

// securedFence is the secured group's fence node, as the server names it.
func securedFence() string {
	return fmt.Sprintf("%s%s/lock%d", securedChroot, fenceRoot, securedLock)
}

// createSecuredFence makes the secured group's fence node under its
// chroot, as the group's identity: the intruder may read it, not write it.
func (c *cluster) createSecuredFence(ctx context.Context) {
	c.t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := zk.Connect(cctx, c.ens.TLSAddrs(), append(c.options(securedAccess), zk.WithSessionTimeout(10*time.Second))...)
	if err != nil {
		c.t.Fatalf("secured connection: %v", err)
	}
	defer conn.Close()
	mustCreate(c.t, ctx, conn, fmt.Sprintf("%s/lock%d", fenceRoot, securedLock))
}

// options are the zk.Connect options of access a, but the session
// timeout.
func (c *cluster) options(a access) []zk.Option {
	switch a {
	case securedAccess:
		return []zk.Option{zk.WithTLS(c.ens.TLSConfig()), zk.WithAuth("digest", []byte(securedAuth)), zk.WithChroot(securedChroot)}
	case intruderAccess:
		return []zk.Option{zk.WithAuth("digest", []byte(intruderAuth))}
	}
	return nil
}

// startIntruder starts the intruder's worker.
func (s *suite) startIntruder(ctx context.Context) {
	cl := s.c.connect(ctx, "intruder", securedChroot, intruderAccess)
	w := s.newWorker("intruder")
	rng := s.rng(1 << 20)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runIntruder(ctx, cl, w, rng)
	}()
}

// runIntruder picks, again and again, one of the secured group's lock
// nodes (or its lock directory, or its fence) and tries to delete it,
// overwrite it or create a node under it. A refusal (zk.ErrNoAuth), or a
// node gone meanwhile, is progress; a success, or an error the server
// checks only after the ACL, is an intrusion.
func (s *suite) runIntruder(ctx context.Context, cl *client, w *worker, rng *rand.Rand) {
	dir := securedChroot + lockPath(securedLock)
	for ctx.Err() == nil {
		targets := []string{securedFence(), dir}
		kids, _, err := cl.conn.Children(ctx, dir)
		if err == nil {
			for _, k := range kids {
				targets = append(targets, zk.Join(dir, k))
			}
		}
		target := targets[rng.IntN(len(targets))]
		var what string
		switch rng.IntN(3) {
		case 0:
			what, err = "delete", cl.conn.Delete(ctx, target, zk.AnyVersion)
		case 1:
			what = "set"
			_, err = cl.conn.Set(ctx, target, []byte("intruder"), zk.AnyVersion)
		default:
			what = "create under"
			_, err = cl.conn.Create(ctx, target+"/intruder-", nil, zk.ModeEphemeralSequential)
		}
		switch {
		case err == nil, errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrNoChildrenForEphemerals):
			// The server checks the ACL first: these say it let the
			// intruder through to the next check.
			s.intrusion(fmt.Sprintf("intruder: %s %s: %v (want %v): another identity may write the secured group's nodes",
				what, target, err, zk.ErrNoAuth))
			w.progress()
		case errors.Is(err, zk.ErrNoAuth):
			s.count("intruder.refused")
			w.progress()
		case errors.Is(err, zk.ErrNoNode):
			s.count("intruder.gone") // the node went meanwhile
			w.progress()
		case ctx.Err() == nil:
			s.count("intruder.error") // the outcome is unknown (connection loss, expiry)
		}
		wait(ctx, time.Duration(rng.IntN(10)+1)*time.Millisecond)
	}
}

// intrusion records v, one of the first maxIntrusions; the rest are
// counted.
func (s *suite) intrusion(v string) {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	if len(s.intrusions) < maxIntrusions {
		s.intrusions = append(s.intrusions, v)
	} else {
		s.countsM["intruder.more-intrusions"]++
	}
}

const maxIntrusions = 20
