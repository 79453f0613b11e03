package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
)

// session connects for a command without CMD: ctx ends at SIGINT or
// SIGTERM. done closes what it opened.
func (e *env) session(c *common) (ctx context.Context, conn zk.Conn, done func(), err error) {
	ctx, stop := e.untilSignal()
	conn, err = c.connect(ctx)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return ctx, conn, func() {
		conn.Close()
		stop()
	}, nil
}

// onePath checks that the arguments after the flags are one path.
func onePath(c *common, args []string) (string, error) {
	if err := c.parse(args); err != nil {
		return "", err
	}
	if c.fs.NArg() != 1 {
		return "", usagef("want one PATH, got %q (-h for usage)", c.fs.Args())
	}
	return c.fs.Arg(0), checkPath(c.fs.Arg(0))
}

// observe prints the leader at c's path, then each change, until a signal.
func (e *env) observe(c *common) int {
	if c.fs.NArg() != 1 {
		return e.fail("elect", usagef("-observe wants one PATH, got %q", c.fs.Args()))
	}
	path := c.fs.Arg(0)
	if err := checkPath(path); err != nil {
		return e.fail("elect", err)
	}
	ctx, conn, done, err := e.session(c)
	if err != nil {
		return e.fail("elect", err)
	}
	defer done()
	el, err := election.New(conn, path)
	if err != nil {
		return e.fail("elect", err)
	}
	defer el.Close()
	for l := range el.Observe(ctx) {
		if l.Vacant() {
			c.print(e.stdout, "(none)", map[string]any{"leader": nil})
			continue
		}
		c.print(e.stdout, l.ID+"\t"+l.Node+"\t"+strconv.FormatInt(l.Token, 10),
			map[string]any{"leader": l.ID, "node": l.Node, "token": l.Token})
	}
	if ctx.Err() != nil {
		return 0 // interrupted: the normal end
	}
	return e.fail("elect", fmt.Errorf("observing stopped: %w", el.Err()))
}

// holder is one line of zkr holders, whatever the recipe: the id its
// participant stored in its node (WithID), its node, its fencing token.
type holder struct {
	ID    string `json:"id"`
	Node  string `json:"node"`
	Token int64  `json:"token"`
	Write *bool  `json:"write,omitempty"` // read/write locks only
}

func holdersCmd(e *env, args []string) int {
	c := newCommon("holders", "zkr holders [-election | -rwlock | -semaphore] [flags] PATH", e.stderr)
	elect := c.fs.Bool("election", false, "PATH is an election: print its participants in queue order (the first leads)")
	rw := c.fs.Bool("rwlock", false, "PATH is a read/write lock: print its writer or its readers")
	sem := c.fs.Bool("semaphore", false, "PATH is a semaphore: print its leases' holders")
	path, err := onePath(c, args)
	if err != nil {
		return e.fail("holders", err)
	}
	if n := btoi(*elect) + btoi(*rw) + btoi(*sem); n > 1 {
		return e.fail("holders", usagef("-election, -rwlock and -semaphore exclude each other"))
	}
	ctx, conn, done, err := e.session(c)
	if err != nil {
		return e.fail("holders", err)
	}
	defer done()
	hs, err := holders(ctx, conn, path, *elect, *rw, *sem)
	if err != nil {
		return e.fail("holders", waitErr(ctx, err))
	}
	for _, h := range hs {
		id := h.ID
		if id == "" {
			id = "-" // an empty first column would vanish for read(1)
		}
		c.print(e.stdout, id+"\t"+h.Node+"\t"+strconv.FormatInt(h.Token, 10), h)
	}
	return 0
}

// holders reads who holds the lock, semaphore or election at path.
func holders(ctx context.Context, conn zk.Conn, path string, elect, rw, sem bool) ([]holder, error) {
	if err := mustExist(ctx, conn, path); err != nil {
		return nil, err
	}
	var hs []holder
	switch {
	case elect:
		el, err := election.New(conn, path)
		if err != nil {
			return nil, err
		}
		defer el.Close()
		ps, err := el.Participants(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			st, ok, err := conn.Exists(ctx, p.Node) // its czxid, the term's token
			if err != nil {
				return nil, err
			}
			if ok {
				hs = append(hs, holder{ID: p.ID, Node: p.Node, Token: st.Czxid})
			}
		}
	case rw:
		rhs, err := rwlock.Holders(ctx, conn, path)
		for _, h := range rhs {
			hs = append(hs, holder{ID: h.ID, Node: h.Node, Token: h.Token, Write: &h.Write})
		}
		return hs, err
	case sem:
		shs, err := semaphore.Holders(ctx, conn, path)
		for _, h := range shs {
			hs = append(hs, holder{ID: h.ID, Node: h.Node, Token: h.Token})
		}
		return hs, err
	default:
		lhs, err := lock.Holders(ctx, conn, path)
		for _, h := range lhs {
			hs = append(hs, holder{ID: h.ID, Node: h.Node, Token: h.Token})
		}
		return hs, err
	}
	return hs, nil
}

// errNoPath is a missing path given to a command that only reads it:
// exit status 3.
var errNoPath = errors.New("no such path")

// mustExist returns errNoPath when path does not exist.
func mustExist(ctx context.Context, conn zk.Conn, path string) error {
	_, ok, err := conn.Exists(ctx, path)
	if err == nil && !ok {
		return fmt.Errorf("%w: %s", errNoPath, path)
	}
	return err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func queueCmd(e *env, args []string) int {
	c := newCommon("queue", "zkr queue offer [flags] PATH DATA | take [flags] PATH | len [flags] PATH", e.stderr)
	shards := c.fs.Int("shards", 1, "the queue's number of shards (queue.WithShards)")
	// Flags may come before the verb, after it, or both.
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return e.fail("queue", c.parse(args))
		}
		return e.fail("queue", usageError{err.Error()})
	}
	if c.fs.NArg() == 0 {
		return e.fail("queue", usagef("want offer, take or len (-h for usage)"))
	}
	verb := c.fs.Arg(0)
	want := map[string]int{"offer": 2, "take": 1, "len": 1}[verb]
	if want == 0 {
		return e.fail("queue", usagef("unknown verb %q: want offer, take or len", verb))
	}
	if err := c.parse(c.fs.Args()[1:]); err != nil {
		return e.fail("queue", err)
	}
	if c.fs.NArg() != want {
		return e.fail("queue", usagef("%s wants %d arguments, got %q", verb, want, c.fs.Args()))
	}
	path := c.fs.Arg(0)
	if err := checkPath(path); err != nil {
		return e.fail("queue", err)
	}
	ctx, conn, done, err := e.session(c)
	if err != nil {
		return e.fail("queue", err)
	}
	defer done()
	if verb == "len" {
		if err := mustExist(ctx, conn, path); err != nil {
			return e.fail("queue", waitErr(ctx, err))
		}
	}
	q, err := queue.New(conn, path, queue.WithShards(*shards))
	if errors.Is(err, queue.ErrInvalidOption) {
		err = usageError{err.Error()}
	}
	if err != nil {
		return e.fail("queue", err)
	}
	defer q.Close()
	switch verb {
	case "offer":
		err = q.Offer(ctx, []byte(c.fs.Arg(1)))
	case "take":
		var data []byte
		if data, err = q.Take(ctx); err == nil {
			c.print(e.stdout, string(data), map[string]any{"data": string(data)})
		}
	case "len":
		var n int
		if n, err = q.Len(ctx); err == nil {
			c.print(e.stdout, strconv.Itoa(n), map[string]any{"len": n})
		}
	}
	if err != nil {
		return e.fail("queue", waitErr(ctx, err))
	}
	return 0
}
