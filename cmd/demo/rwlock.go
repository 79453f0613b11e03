package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
)

// rwlockScenario: three readers hold /demo/rwlock together; a writer waits
// for them and then holds it alone while a reader and a second writer
// queue; the writer downgrades (takes the read lock, releases the write
// lock): the queued reader joins it, and the second writer waits for both.
// Each participant has its own session. After every step the holders, as
// rwlock.Holders reports them from another session, are printed and
// checked.
func rwlockScenario(ctx context.Context, c *cluster, p *printer) error {
	defer p.flush()
	const path = "/demo/rwlock"
	p.say("rwlock: readers share %s, writers hold it alone, a writer downgrades; on %s", path, c.where)
	var printing sync.WaitGroup
	names := []string{"reader-1", "reader-2", "reader-3", "writer-1", "writer-2"}
	parts := map[string]*rwlock.RWLock{}
	for _, name := range names {
		conn, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		rw, err := rwlock.New(conn, path, rwlock.WithID(name))
		if err != nil {
			return err
		}
		parts[name] = rw
		p.follow(&printing, name+"/r", rw.ReadLock().Subscribe())
		p.follow(&printing, name+"/w", rw.WriteLock().Subscribe())
	}
	defer func() {
		for _, rw := range parts {
			rw.Close()
		}
		printing.Wait()
	}()
	observer, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer observer.Close()
	// nodeOf names the participants by their nodes, for the holders lines.
	var mu sync.Mutex
	nodeOf := map[string]string{}
	holders := func(want string) error {
		hs, err := rwlock.Holders(ctx, observer, path)
		if err != nil {
			return err
		}
		var got []string
		mu.Lock()
		defer mu.Unlock()
		for _, h := range hs {
			who := nodeOf[h.Node]
			if h.Write {
				who += "(write)"
			}
			got = append(got, who)
		}
		p.say("  holders: %s", strings.Join(got, " "))
		if g := strings.Join(got, " "); g != want {
			return fmt.Errorf("holders %q, want %q", g, want)
		}
		return nil
	}
	take := func(name string, write bool) (*rwlock.Grant, error) {
		l := parts[name].ReadLock()
		if write {
			l = parts[name].WriteLock()
		}
		g, err := l.Acquire(ctx)
		if err == nil {
			mu.Lock()
			nodeOf[g.Node()] = name
			mu.Unlock()
		}
		return g, err
	}
	// queue starts an Acquire that waits, and returns once its node is in
	// the queue (n contenders).
	queue := func(name string, write bool, n int) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := take(name, write)
			done <- err
		}()
		awaitContenders(ctx, observer, path, n)
		return done
	}

	p.say("three readers take the read lock")
	for _, r := range names[:3] {
		if _, err := take(r, false); err != nil {
			return err
		}
	}
	if err := holders("reader-1 reader-2 reader-3"); err != nil {
		return err
	}
	p.say("writer-1 asks for the write lock: it waits for the readers")
	w1 := queue("writer-1", true, 4)
	for _, r := range names[:3] {
		if err := parts[r].ReadLock().Release(ctx); err != nil {
			return err
		}
	}
	if err := <-w1; err != nil {
		return err
	}
	if err := holders("writer-1(write)"); err != nil {
		return err
	}
	p.say("reader-1 and then writer-2 queue behind writer-1")
	r1 := queue("reader-1", false, 2)
	w2 := queue("writer-2", true, 3)
	p.say("writer-1 downgrades: the read lock at once, then the write lock goes")
	if _, err := take("writer-1", false); err != nil {
		return err
	}
	if err := parts["writer-1"].WriteLock().Release(ctx); err != nil {
		return err
	}
	if err := <-r1; err != nil {
		return err
	}
	if err := holders("writer-1 reader-1"); err != nil {
		return err
	}
	p.say("writer-2 still waits; the readers let go")
	if err := parts["writer-1"].ReadLock().Release(ctx); err != nil {
		return err
	}
	if err := parts["reader-1"].ReadLock().Release(ctx); err != nil {
		return err
	}
	if err := <-w2; err != nil {
		return err
	}
	if err := holders("writer-2(write)"); err != nil {
		return err
	}
	p.say("rwlock summary: readers held together, each writer alone, and the downgrade let no writer in")
	return nil
}

// awaitContenders waits, with a child watch, until path has at least n
// children.
func awaitContenders(ctx context.Context, c zk.Conn, path string, n int) {
	for {
		kids, _, ch, err := c.ChildrenW(ctx, path)
		if err != nil || len(kids) >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}
