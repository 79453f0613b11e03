package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
)

// The secure scenario's identities. Their passwords appear in no output:
// a test greps the whole run for "-pw-".
const (
	aliceCred = "alice:alice-pw-7f3a"
	bobCred   = "bob:bob-pw-c41e"
)

// secureScenario: two digest identities share one ensemble. alice's
// sessions are rooted at /apps/billing (a chroot, as the connect string
// "host:port/apps/billing" gives) and she takes the lock /locks/orders
// there; with WithAuth and no ACL option her nodes carry the safe default,
// CreatorAll plus world read. bob, another identity without the chroot,
// sees her as the holder (world read), but his delete of her node and his
// own Acquire are refused with zk.ErrNoAuth, and she still holds. The
// sessions take -zk's servers, chroot (under which both work) and TLS;
// their identities replace ZKR_AUTH's.
func secureScenario(ctx context.Context, c *cluster, p *printer) error {
	defer p.flush()
	const chroot, path = "/apps/billing", "/locks/orders"
	base := c.settings.Chroot // -zk's chroot, under which the scenario works
	p.say("secure: alice and bob are digest identities on %s; alice's sessions are rooted at %s", c.where, chroot)
	if c.settings.Auth != nil {
		if err := c.openApps(ctx, p); err != nil {
			return err
		}
	}
	alice, err := c.dial(ctx, c.as(aliceCred, base+chroot)...)
	if err != nil {
		return fmt.Errorf("alice: %w", err)
	}
	defer alice.Close()
	bob, err := c.dial(ctx, c.as(bobCred, base)...)
	if err != nil {
		return fmt.Errorf("bob: %w", err)
	}
	defer bob.Close()

	var printing sync.WaitGroup
	defer printing.Wait()
	al, err := lock.New(alice, path, lock.WithID("alice"))
	if err != nil {
		return err
	}
	defer al.Close()
	p.follow(&printing, "alice", al.Subscribe())
	g, err := al.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("alice: %w", err)
	}
	p.say("alice holds %s, her path (on the server %s%s): node %s, token %#x", path, chroot, path, g.Node(), g.Token())
	p.say("its nodes' ACL is an authenticated connection's default: alice may do everything (CreatorAll), anyone may read")

	server := chroot + path // the lock's path for bob, who has no chroot
	hs, err := lock.Holders(ctx, bob, server)
	if err != nil || len(hs) != 1 || hs[0].Node != chroot+g.Node() {
		return fmt.Errorf("bob's holders of %s: %v, %v; want alice's node %s%s", server, hs, err, chroot, g.Node())
	}
	p.say("bob reads the holders of %s (world read): %s %s", server, hs[0].ID, hs[0].Node)

	err = bob.Delete(ctx, hs[0].Node, zk.AnyVersion)
	if !errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("bob's delete of alice's node: %v, want zk.ErrNoAuth", err)
	}
	p.say("bob deletes alice's node: refused: %v", err)

	bl, err := lock.New(bob, server, lock.WithID("bob"))
	if err != nil {
		return err
	}
	defer bl.Close()
	p.follow(&printing, "bob", bl.Subscribe())
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = bl.Acquire(actx)
	cancel()
	if !errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("bob's Acquire: %v, want zk.ErrNoAuth", err)
	}
	p.say("bob's lock.Acquire(%s): refused: %v", server, err)
	bl.Close()

	hs, err = lock.Holders(ctx, alice, path)
	held := err == nil && len(hs) == 1 && hs[0].Node == g.Node()
	select {
	case <-g.Lost():
		held = false
	default:
	}
	if err := al.Release(ctx); err != nil {
		return fmt.Errorf("alice: %w", err)
	}
	al.Close()
	printing.Wait()

	p.say("secure summary")
	p.say("  bob: world read yes, delete of alice's node zk.ErrNoAuth, Acquire zk.ErrNoAuth")
	p.say("  alice held the lock throughout: %t (her node %s, her grant not lost)", held, g.Node())
	if !held {
		return fmt.Errorf("alice lost the lock: holders %v, %v", hs, err)
	}
	return nil
}

// openApps: under ZKR_AUTH, -zk's chroot is that identity's (CreatorAll
// plus world read), so alice could not create her root in it. Its owner
// makes /apps there, where anyone may create (as an administrator prepares
// a namespace for services); only the owner may delete.
func (c *cluster) openApps(ctx context.Context, p *printer) error {
	owner, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer owner.Close()
	acl := append(zk.CreatorAll(), zk.WorldACL(zk.PermRead|zk.PermCreate)...)
	if _, err := owner.CreateACL(ctx, "/apps", nil, zk.ModePersistent, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("creating /apps as %s: %w", c.settings.Describe(), err)
	}
	p.say("%s made /apps, where anyone may create a node (world read, create) and only it may delete", c.settings.Describe())
	return nil
}

// as is the options of a session of the digest identity cred, rooted at
// chroot ("" for none), over -tls-* when given.
func (c *cluster) as(cred, chroot string) []zk.Option {
	opts := []zk.Option{zk.WithAuth("digest", []byte(cred))}
	if chroot != "" {
		opts = append(opts, zk.WithChroot(chroot))
	}
	if c.settings.TLS != nil {
		opts = append(opts, zk.WithTLS(c.settings.TLS))
	}
	return opts
}
