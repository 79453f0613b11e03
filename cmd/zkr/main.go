// Command zkr runs commands under zkrecipes' ZooKeeper recipes, like
// etcdctl lock/elect and consul lock:
//
//	zkr lock [flags] PATH -- CMD ARGS...       run CMD while holding the lock at PATH
//	zkr elect [flags] PATH ID -- CMD ARGS...   run CMD while ID leads the election at PATH
//	zkr elect -observe [flags] PATH            print each leader change, until interrupted (then exit 0)
//	zkr holders [-election|-rwlock|-semaphore] PATH  print who holds the lock (or the election's participants): id, node, token
//	zkr queue offer [flags] PATH DATA          add DATA to the queue at PATH
//	zkr queue take [flags] PATH                remove and print the head item, waiting for one
//	zkr queue len [flags] PATH                 print the number of items
//	                                           (-shards N: a queue of N shards, queue.WithShards)
//	zkr watch [-tree [-depth N]] [flags] PATH  print the node (-tree: the nodes below it too), then each change, until interrupted
//	zkr services [flags] BASE [NAME]           print the services under BASE (machines/discovery), each with its
//	                                           number of instances, or NAME's instances: id, address, port, payload
//	zkr trace FILE.jsonl... -html OUT [-trace-json OUT]   render recordings (observers.WithRecording) as one timeline
//	zkr server [-port N] [-data DIR]           run a ZooKeeper for development until interrupted
//
// Flags every subcommand but trace and server takes (trace reads a file and
// needs no server; server is one):
//
//	-zk host:port,...[/chroot]  ZooKeeper's connect string (default: $ZKR_SERVERS);
//	                       under a chroot every path is relative to it
//	-tls-ca FILE           speak TLS (the servers' secureClientPort), trusting FILE's PEM CAs
//	-tls-cert, -tls-key    a PEM client certificate and its key, for servers that ask for one
//	-session 10s           session timeout asked of the server
//	-connect-timeout 10s   how long to wait for a server to answer
//	-o json                one JSON object per line instead of text
//
// ZKR_AUTH=scheme:credential in the environment (digest:user:password,
// for one; never a flag, as command lines show in ps) authenticates the
// session, and the nodes zkr creates are then its identity's (every
// permission) and world-readable; without it they are writable by anyone.
//
// lock and elect also take -grace 5s. CMD runs with ZKR_LOCK_NODE and
// ZKR_LOCK_TOKEN (lock) or ZKR_ELECT_NODE, ZKR_ELECT_TOKEN and ZKR_ELECT_ID
// (elect) in its environment: our node and the grant's fencing token, in
// decimal. When the grant is lost (the connection suspended or the session
// expired: another process may hold it now), CMD gets SIGTERM, and SIGKILL
// after -grace. SIGINT and SIGTERM sent to zkr are forwarded to CMD. When
// CMD exits, zkr releases the lock (resigns) and exits with CMD's status
// (128+N when a signal N ended it). zkr signals CMD only, not the processes
// CMD started.
//
// Exit status: CMD's for lock and elect; otherwise 0 on success, 1 on an
// error (among them a credential the server refuses, a failed TLS
// handshake, an operation a node's ACL refuses: "not authenticated"), 2 for
// bad usage (an unknown flag, a bad path, no servers given, a bad connect
// string, ZKR_AUTH or -tls-* file), 3 when no server answered within
// -connect-timeout or the path holders, queue len or services reads does not exist
// ("no such path"), and 128+N when signal N interrupted a wait.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkflags"
)

const usage = `usage:
  zkr lock [flags] PATH -- CMD ARGS...
  zkr elect [flags] PATH ID -- CMD ARGS...
  zkr elect -observe [flags] PATH
  zkr holders [-election | -rwlock | -semaphore] [flags] PATH
  zkr queue offer|take|len [flags] PATH [DATA]
  zkr watch [-tree [-depth N]] [flags] PATH
  zkr services [flags] BASE [NAME]
  zkr trace FILE.jsonl... -html OUT.html [-trace-json OUT.json]
  zkr server [-port N] [-data DIR]
"zkr COMMAND -h" lists a command's flags.
`

// Exit statuses of zkr itself.
const (
	exitError   = 1
	exitUsage   = 2
	exitConnect = 3 // also a missing path that a command only reads
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	code := run(os.Args[1:], os.Stdout, os.Stderr, sigs)
	signal.Stop(sigs)
	os.Exit(code)
}

// env is what a subcommand runs with.
type env struct {
	stdout, stderr io.Writer
	sigs           <-chan os.Signal // SIGINT and SIGTERM sent to zkr
}

// commands maps a subcommand to its function, which returns zkr's exit
// status.
var commands = map[string]func(e *env, args []string) int{
	"lock":     lockCmd,
	"elect":    electCmd,
	"holders":  holdersCmd,
	"queue":    queueCmd,
	"watch":    watchCmd,
	"services": servicesCmd,
	"trace":    traceCmd,
	"server":   serverCmd,
}

func run(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	if len(args) == 0 || commands[args[0]] == nil {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	return commands[args[0]](&env{stdout: stdout, stderr: stderr, sigs: sigs}, args[1:])
}

// usageError is bad input: zkr prints it and exits with status 2.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errConnect is no server answering in time: exit status 3.
var errConnect = errors.New("no ZooKeeper server answered")

// interrupted is a signal that ended a wait: exit status 128+signo.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

// fail prints err as one line and returns the exit status it means.
func (e *env) fail(cmd string, err error) int {
	var (
		u  usageError
		in interrupted
	)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &in):
		return 128 + signo(in.sig)
	}
	hint := ""
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		hint = " (a node's ACL refuses this identity: ZKR_AUTH sets it)"
	case errors.Is(err, zk.ErrAuthFailed):
		hint = " (the server refused ZKR_AUTH's credential)"
	}
	fmt.Fprintf(e.stderr, "zkr %s: %v%s\n", cmd, err, hint)
	switch {
	case errors.As(err, &u), errors.Is(err, zk.ErrInvalidPath):
		return exitUsage
	case errors.Is(err, errConnect), errors.Is(err, errNoPath):
		return exitConnect
	}
	return exitError
}

func signo(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGINT)
}

// common are the flags every subcommand has.
type common struct {
	fs             *flag.FlagSet
	synopsis       string // the usage line(s) -h prints above the flags
	stderr         io.Writer
	zk             *zkflags.Flags
	conn           zkflags.Settings // zk, parsed
	session        time.Duration
	connectTimeout time.Duration
	output         string
}

func newCommon(cmd, synopsis string, stderr io.Writer) *common {
	c := &common{fs: newFlags(cmd), synopsis: synopsis, stderr: stderr}
	c.zk = zkflags.Register(c.fs, os.Getenv("ZKR_SERVERS"), "ZooKeeper's connect string host:port[,host:port...][/chroot] (default $ZKR_SERVERS); credentials: ZKR_AUTH=scheme:credential in the environment")
	c.fs.DurationVar(&c.session, "session", 10*time.Second, "session timeout")
	c.fs.DurationVar(&c.connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for a server to answer")
	c.fs.StringVar(&c.output, "o", "text", "output format: text or json")
	return c
}

// newFlags is the flag set of subcommand cmd.
func newFlags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("zkr "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a bad flag is one line, printed by fail
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args into fs. -h prints the usage, synopsis then the
// flags, and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, synopsis string, stderr io.Writer, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "usage: "+synopsis)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return usageError{err.Error()}
	}
	return nil
}

// parse parses args and checks the common flags.
func (c *common) parse(args []string) error {
	if err := parseFlags(c.fs, c.synopsis, c.stderr, args); err != nil {
		return err
	}
	conn, err := c.zk.Parse(os.Getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	c.conn = conn
	switch {
	case len(conn.Servers) == 0:
		return usagef("no ZooKeeper servers: give -zk host:port or set ZKR_SERVERS")
	case c.output != "text" && c.output != "json":
		return usagef("-o %q: want text or json", c.output)
	case c.session <= 0:
		return usagef("-session %v: want a positive duration", c.session)
	case c.connectTimeout <= 0:
		return usagef("-connect-timeout %v: want a positive duration", c.connectTimeout)
	}
	return nil
}

// checkPath refuses a path no recipe can use, before anything is sent.
func checkPath(path string) error {
	if err := zk.ValidatePath(path); err != nil {
		return usagef("bad path: %v", err)
	}
	if path == "/" {
		return usagef("bad path %q: the root cannot be used", path)
	}
	return nil
}

// connect opens a session, waiting at most -connect-timeout (errConnect)
// or until ctx ends. A refused credential (zk.ErrAuthFailed) or a failed
// TLS handshake is returned as it is, within the timeout.
func (c *common) connect(ctx context.Context) (zk.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	defer cancel()
	opts := append([]zk.Option{zk.WithSessionTimeout(c.session)}, c.conn.Options()...)
	conn, err := zk.Connect(cctx, c.conn.Servers, opts...)
	switch {
	case err == nil:
		return conn, nil
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w at %s within %v", errConnect, c.zk.ZK(), c.connectTimeout)
	case errors.Is(err, zk.ErrNoServers), errors.Is(err, zk.ErrInvalidOption):
		return nil, usagef("-zk %q: %v", c.zk.ZK(), err)
	}
	return nil, err
}

// print writes one result line: obj as JSON with -o json, text otherwise.
func (c *common) print(w io.Writer, text string, obj any) {
	if c.output == "json" {
		b, _ := json.Marshal(obj)
		text = string(b)
	}
	fmt.Fprintln(w, text)
}

// untilSignal returns a context that ends, with interrupted as its cause,
// when zkr gets SIGINT or SIGTERM, for the waits before CMD starts (and
// for commands without one). stop ends the watch and gives the signals
// back to the caller.
func (e *env) untilSignal() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-e.sigs:
			cancel(interrupted{s})
		case <-quit:
		}
	}()
	return ctx, func() {
		close(quit)
		<-done
	}
}

// waitErr is err, or the signal that ended ctx.
func waitErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
