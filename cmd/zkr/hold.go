package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/lock"
)

// releaseTimeout bounds the release (or resign) after CMD exits.
const releaseTimeout = 10 * time.Second

// grant is what lock and elect hold while CMD runs.
type grant struct {
	what  string // "lock" or "leadership", for messages
	lost  <-chan struct{}
	err   func() error
	env   []string
	leave func(ctx context.Context) error // release or resign
}

func lockCmd(e *env, args []string) int {
	c := newCommon("lock", "zkr lock [flags] PATH -- CMD ARGS...", e.stderr)
	grace := c.fs.Duration("grace", 5*time.Second, "how long CMD has between SIGTERM and SIGKILL once the lock is lost")
	if err := c.parse(args); err != nil {
		return e.fail("lock", err)
	}
	path, argv, err := parseHold(c, 1)
	if err != nil {
		return e.fail("lock", err)
	}
	return e.hold("lock", c, *grace, argv, func(ctx context.Context, conn zk.Conn) (*grant, func(), error) {
		l, err := lock.New(conn, path[0])
		if err != nil {
			return nil, nil, err
		}
		g, err := l.Acquire(ctx)
		if err != nil {
			l.Close()
			return nil, nil, err
		}
		return &grant{
			what: "lock " + path[0], lost: g.Lost(), err: g.Err, leave: l.Release,
			env: []string{"ZKR_LOCK_NODE=" + g.Node(), "ZKR_LOCK_TOKEN=" + strconv.FormatInt(g.Token(), 10)},
		}, func() { l.Close() }, nil
	})
}

func electCmd(e *env, args []string) int {
	c := newCommon("elect", "zkr elect [flags] PATH ID -- CMD ARGS...\n       zkr elect -observe [flags] PATH", e.stderr)
	grace := c.fs.Duration("grace", 5*time.Second, "how long CMD has between SIGTERM and SIGKILL once leadership is lost")
	observe := c.fs.Bool("observe", false, "print each leader change (one line each) until interrupted")
	if err := c.parse(args); err != nil {
		return e.fail("elect", err)
	}
	if *observe {
		return e.observe(c)
	}
	pa, argv, err := parseHold(c, 2)
	if err != nil {
		return e.fail("elect", err)
	}
	path, id := pa[0], pa[1]
	if id == "" {
		return e.fail("elect", usagef("empty ID"))
	}
	return e.hold("elect", c, *grace, argv, func(ctx context.Context, conn zk.Conn) (*grant, func(), error) {
		el, err := election.New(conn, path, election.WithID(id))
		if err != nil {
			return nil, nil, err
		}
		t, err := el.Campaign(ctx)
		if err != nil {
			el.Close()
			return nil, nil, err
		}
		return &grant{
			what: "leadership of " + path, lost: t.Lost(), err: t.Err, leave: el.Resign,
			env: []string{"ZKR_ELECT_NODE=" + t.Node(), "ZKR_ELECT_TOKEN=" + strconv.FormatInt(t.Token(), 10), "ZKR_ELECT_ID=" + id},
		}, func() { el.Close() }, nil
	})
}

// parseHold splits the arguments after the flags, "ARG... [--] CMD
// ARGS..." with n ARGs (the first a path), into the ARGs and CMD's argv.
func parseHold(c *common, n int) ([]string, []string, error) {
	rest := c.fs.Args()
	if len(rest) < n {
		return nil, nil, usagef("missing arguments: want %d before CMD (-h for usage)", n)
	}
	pos, argv := rest[:n], rest[n:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return nil, nil, usagef("no CMD to run (-h for usage)")
	}
	if err := checkPath(pos[0]); err != nil {
		return nil, nil, err
	}
	return pos, argv, nil
}

// hold connects, takes the grant (waiting until it is ours, or a signal),
// runs argv while it holds, gives it back and returns CMD's exit status.
func (e *env) hold(cmd string, c *common, grace time.Duration, argv []string,
	take func(ctx context.Context, conn zk.Conn) (*grant, func(), error)) int {
	if grace < 0 {
		return e.fail(cmd, usagef("-grace %v: want a duration of at least 0", grace))
	}
	ctx, stop := e.untilSignal()
	conn, err := c.connect(ctx)
	if err != nil {
		stop()
		return e.fail(cmd, err)
	}
	defer conn.Close()
	g, closeHandle, err := take(ctx, conn)
	err = waitErr(ctx, err)
	stop()
	if err != nil {
		return e.fail(cmd, err)
	}
	defer closeHandle()

	code := e.supervise(cmd, g, grace, argv)

	rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := g.leave(rctx); err != nil && g.err() == nil {
		fmt.Fprintf(e.stderr, "zkr %s: giving up the %s: %v\n", cmd, g.what, err)
	}
	return code
}

// supervise runs argv until it exits, forwarding zkr's signals to it, and
// stops it (SIGTERM, SIGKILL after grace) when g is lost. It returns CMD's
// exit status.
func (e *env) supervise(cmd string, g *grant, grace time.Duration, argv []string) int {
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	if w, ok := e.stdout.(*os.File); ok {
		child.Stdout = w
	}
	if w, ok := e.stderr.(*os.File); ok {
		child.Stderr = w
	}
	child.Env = append(os.Environ(), g.env...)
	if err := child.Start(); err != nil {
		fmt.Fprintf(e.stderr, "zkr %s: %v\n", cmd, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	exited := make(chan struct{})
	go func() {
		child.Wait()
		close(exited)
	}()
	lost := g.lost
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			return exitStatus(child.ProcessState)
		case s := <-e.sigs:
			child.Process.Signal(s)
		case <-lost:
			lost = nil
			fmt.Fprintf(e.stderr, "zkr %s: lost the %s (%v): stopping %s\n", cmd, g.what, g.err(), argv[0])
			child.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			child.Process.Kill()
		}
	}
}

// exitStatus is a finished process's status as a shell reports it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
