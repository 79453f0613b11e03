package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
)

// discoveryScenario: three instances of "api" register under
// /demo/services, each on its own session, and a client follows the
// service with a provider, picking instances round robin from memory.
// inst-2's session expires: it leaves the client's instances, and comes
// back once its registration has made its node again on a new session.
func discoveryScenario(ctx context.Context, c *cluster, p *printer) error {
	defer p.flush()
	const base, name, victim = "/demo/services", "api", "inst-2"
	p.say("discovery: 3 instances of %q register under %s, a client follows them, on %s", name, base, c.where)
	var printing sync.WaitGroup
	defer printing.Wait()
	cconn, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cconn.Close()
	prov, err := discovery.NewProvider(cconn, base, name, discovery.WithID("client"))
	if err != nil {
		return err
	}
	defer prov.Close() // ends the subscriptions, then printing.Wait
	p.follow(&printing, "client", prov.Subscribe())
	view := &clientView{sub: prov.Subscribe(), ids: map[string]bool{}} // the scenario's own waits
	defer view.sub.Close()

	var (
		vconn  zk.Conn
		expire func() (string, error)
		vreg   *discovery.Registration
	)
	for i := range 3 {
		id := fmt.Sprintf("inst-%d", i+1)
		var conn zk.Conn
		if id == victim {
			conn, expire, err = c.expirable(ctx)
		} else {
			conn, err = c.connect(ctx)
		}
		if err != nil {
			return err
		}
		defer conn.Close()
		r, err := discovery.Register(ctx, conn, base, discovery.Instance{
			Name: name, ID: id, Address: fmt.Sprintf("10.0.0.%d", i+1), Port: 8080})
		if err != nil {
			return err
		}
		defer r.Close()
		p.follow(&printing, id, r.Subscribe())
		if err := view.await(ctx, events.MemberJoined, id); err != nil {
			return err
		}
		if id == victim {
			vconn, vreg = conn, r
		}
	}
	pause()
	var picks []string
	for range 4 {
		inst, err := prov.Instance(ctx)
		if err != nil {
			return err
		}
		picks = append(picks, inst.ID)
	}
	p.say("the client sees %s; its picks (round robin): %s", view, strings.Join(picks, " "))

	old := vconn.SessionID()
	p.say("%s's session %#x expires", victim, old)
	how, err := expire()
	if err != nil {
		return err
	}
	if err := view.await(ctx, events.MemberLeft, victim); err != nil {
		return err
	}
	left := view.String()
	p.say("%s: %s; the client saw it leave: %s", victim, how, left)
	if vconn.State() == zk.StateClosed { // no session to register again on: restart it
		if vconn, err = c.connect(ctx); err != nil {
			return err
		}
		defer vconn.Close()
		if vreg, err = discovery.Register(ctx, vconn, base, vreg.Instance()); err != nil {
			return err
		}
		defer vreg.Close()
		p.say("%s restarts on a new session and registers again", victim)
	}
	if err := view.await(ctx, events.MemberJoined, victim); err != nil {
		return err
	}
	back := view.String()
	st, there, err := vconn.Exists(ctx, vreg.Node())
	if err != nil {
		return err
	}
	pause()
	p.say("discovery summary")
	p.say("  the client saw: %s, then %s, then %s", "[inst-1 inst-2 inst-3]", left, back)
	switch {
	case left != "[inst-1 inst-3]" || back != "[inst-1 inst-2 inst-3]" || instanceIDs(prov) != back:
		return fmt.Errorf("the client saw %s after the expiry and %s after the new registration (instances %s)", left, back, instanceIDs(prov))
	case !there || st.EphemeralOwner != vconn.SessionID() || vconn.SessionID() == old:
		return fmt.Errorf("%s is owned by %#x, not %s's session %#x", vreg.Node(), st.EphemeralOwner, victim, vconn.SessionID())
	}
	p.say("  %s is back on its new session %#x", vreg.Node(), vconn.SessionID())
	return nil
}

// instanceIDs is the ids of the provider's instances, as [a b c].
func instanceIDs(prov *discovery.Provider) string {
	var ids []string
	for _, in := range prov.Instances() {
		ids = append(ids, in.ID)
	}
	return "[" + strings.Join(ids, " ") + "]"
}

// clientView is the service's instances as the provider's events said
// them, one event at a time (Instances may already show a later change).
type clientView struct {
	sub *events.Subscription
	ids map[string]bool
}

func (v *clientView) String() string {
	return "[" + strings.Join(slices.Sorted(maps.Keys(v.ids)), " ") + "]"
}

// await takes the provider's events until the event typ of the instance
// id.
func (v *clientView) await(ctx context.Context, typ events.Type, id string) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-v.sub.C:
			if !ok {
				return errors.New("the client's provider stopped")
			}
			evID := ev.Node[strings.LastIndexByte(ev.Node, '/')+1:]
			switch ev.Type {
			case events.MemberJoined:
				v.ids[evID] = true
			case events.MemberLeft:
				delete(v.ids, evID)
			}
			if ev.Type == typ && evID == id {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no %s of %s within 30 s", typ, id)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// expirable opens a session whose expiry expire causes: on the
// simulator, any; on real servers, one through a proxy in front of them
// (testkit/proxy), which has the server end it, as it does a session
// whose process stopped answering. The connection then starts a new
// session by itself. With TLS, which that proxy does not speak here,
// expire crashes the session instead (cluster.crash).
func (c *cluster) expirable(ctx context.Context) (zk.Conn, func() (string, error), error) {
	if c.sim != nil || c.settings.TLS != nil {
		conn, err := c.connect(ctx)
		return conn, func() (string, error) { return c.crash(conn), nil }, err
	}
	px, err := proxy.NewEnsemble(c.settings.Servers)
	if err != nil {
		return nil, nil, err
	}
	through := *c
	through.settings.Servers = px.Addrs()
	conn, err := through.connect(ctx)
	if err != nil {
		px.Close()
		return nil, nil, err
	}
	return &proxiedConn{Conn: conn, proxies: px}, func() (string, error) {
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := px.ExpireSession(ectx, conn.SessionID()); err != nil {
			return "", err
		}
		return "the server expired its session", nil
	}, nil
}

// proxiedConn closes its proxies after the connection.
type proxiedConn struct {
	zk.Conn
	proxies *proxy.Ensemble
}

func (c *proxiedConn) Close() error {
	err := c.Conn.Close()
	c.proxies.Close()
	return err
}
