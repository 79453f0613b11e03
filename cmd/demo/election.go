package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/election"
)

// participant is one candidate: its own session and election handle.
type participant struct {
	id   string
	conn zk.Conn
	e    *election.Election
}

// elected is a participant's Campaign returning: it leads that term.
type elected struct {
	p    *participant
	term *election.Term
}

// electionScenario: five participants campaign for /demo/election. The
// first leader resigns and the next one takes over; then that leader
// crashes, without resigning, and a third takes over. Every participant's
// transitions are printed as they happen, and an observer (a handle that
// never campaigns) prints each leader change it sees.
func electionScenario(ctx context.Context, c *cluster, p *printer) error {
	defer p.flush()
	const path = "/demo/election"
	p.say("election: 5 participants campaign for %s, on %s", path, c.where)
	var printing sync.WaitGroup
	var ps []*participant
	for i := range 5 {
		conn, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		pt := &participant{id: fmt.Sprintf("node-%d", i+1), conn: conn}
		if pt.e, err = election.New(conn, path, election.WithID(pt.id)); err != nil {
			return err
		}
		defer pt.e.Close()
		p.follow(&printing, pt.id, pt.e.Subscribe())
		ps = append(ps, pt)
	}
	stopObserver, err := observe(ctx, c, p, path)
	if err != nil {
		return err
	}
	defer stopObserver()

	wins := make(chan elected, len(ps))
	for _, pt := range ps {
		go func() {
			term, err := pt.e.Campaign(ctx)
			if err != nil {
				if !errors.Is(err, election.ErrClosed) {
					p.say("%s: campaign ended: %v", pt.id, err)
				}
				return
			}
			wins <- elected{pt, term}
		}()
	}

	var leaders []string
	first, err := await(ctx, wins)
	if err != nil {
		return err
	}
	pause()
	p.say("%s leads (token %#x); it resigns", first.p.id, first.term.Token())
	if err := first.p.e.Resign(ctx); err != nil {
		return err
	}
	leaders = append(leaders, first.p.id+" (resigned)")

	second, err := await(ctx, wins)
	if err != nil {
		return err
	}
	pause()
	p.say("%s leads (token %#x); it crashes", second.p.id, second.term.Token())
	how := p.crash(c, second.p.id, second.p.conn)
	<-second.term.Lost()
	p.say("%s: %s, and its Term.Lost() closed", second.p.id, how)
	leaders = append(leaders, second.p.id+" (crashed)")

	third, err := await(ctx, wins)
	if err != nil {
		return err
	}
	pause()
	p.say("%s leads (token %#x)", third.p.id, third.term.Token())
	leaders = append(leaders, third.p.id)

	stopObserver()
	for _, pt := range ps {
		pt.e.Close() // ends the campaigns still waiting, and the subscriptions
	}
	printing.Wait()
	p.say("election summary")
	p.say("  leaders in turn: %s", strings.Join(leaders, " → "))
	if !(first.term.Token() < second.term.Token() && second.term.Token() < third.term.Token()) {
		return fmt.Errorf("tokens %#x, %#x, %#x do not increase", first.term.Token(), second.term.Token(), third.term.Token())
	}
	p.say("  fencing tokens increase: %#x < %#x < %#x", first.term.Token(), second.term.Token(), third.term.Token())
	return nil
}

// observe starts an observer on path, on its own session, printing every
// leader change until stop is called. stop may be called more than once.
func observe(ctx context.Context, c *cluster, p *printer, path string) (stop func(), err error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	obs, err := election.New(conn, path, election.WithID("observer"))
	if err != nil {
		conn.Close()
		return nil, err
	}
	octx, cancel := context.WithCancel(ctx)
	changes := obs.Observe(octx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range changes {
			if l.Vacant() {
				p.say("observer: no leader")
			} else {
				p.say("observer: the leader is %s (token %#x)", l.ID, l.Token)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		obs.Close()
		conn.Close()
	}, nil
}

// pause lets the events of a step be printed before the next step starts,
// so the story reads in order. Deliberate pacing, nothing waits on it.
func pause() { time.Sleep(100 * time.Millisecond) }

// await waits for the next participant to lead.
func await(ctx context.Context, wins <-chan elected) (elected, error) {
	select {
	case w := <-wins:
		return w, nil
	case <-time.After(30 * time.Second):
		return elected{}, errors.New("no leader within 30 s")
	case <-ctx.Done():
		return elected{}, ctx.Err()
	}
}
