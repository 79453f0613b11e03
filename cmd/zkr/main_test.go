package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// wait bounds every wait for a process or a line of output.
const wait = 60 * time.Second

// TestZkr builds zkr once and runs it against one real ZooKeeper server.
func TestZkr(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "zkr")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := testkit.StartServer(t)
	z := &zkr{bin: bin, addr: srv.Addr()}

	t.Run("lock runs one command at a time", z.testLockExcludes)
	t.Run("an expired session stops the command and the next one runs", z.testExpiry)
	t.Run("exit statuses", z.testExitStatus)
	t.Run("queue round trip", z.testQueue)
	t.Run("elect, holders and a forwarded signal", z.testElect)
	t.Run("holders of a read/write lock and a semaphore", z.testSharedHolders)
	t.Run("a missing path", z.testMissingPath)
	t.Run("server serves until a signal and keeps -data", z.testServer)
	t.Run("ZKR_AUTH and a chroot: another identity reads but cannot take the lock", z.testSecured)
	t.Run("a credential the server refuses", z.testAuthFailed)
	t.Run("TLS failures", z.testTLSFailures)
}

type zkr struct {
	bin, addr string
}

// cmd returns zkr with args, with no ZKR_SERVERS from the environment.
func (z *zkr) cmd(args ...string) *exec.Cmd {
	c := exec.Command(z.bin, args...)
	c.Env = append(os.Environ(), "ZKR_SERVERS=")
	c.WaitDelay = wait
	return c
}

// run runs zkr to its end and returns its stdout, stderr and exit status.
func (z *zkr) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := z.cmd(args...)
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, c)
	return stdout.String(), stderr.String(), code
}

// waitExit waits (bounded) for c to exit and returns its exit status.
func waitExit(t *testing.T, c *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", c.Args, err)
		}
		return c.ProcessState.ExitCode()
	case <-time.After(wait):
		c.Process.Kill()
		<-done
		t.Fatalf("%v still running after %v", c.Args, wait)
		return -1
	}
}

// lines reads r line by line into a channel, closed at EOF.
func lines(r *os.File) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		defer r.Close()
		s := bufio.NewScanner(r)
		for s.Scan() {
			ch <- s.Text()
		}
	}()
	return ch
}

// next returns the next line from ch, failing the test after a bounded wait
// or at EOF.
func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("output ended early")
		}
		return l
	case <-time.After(wait):
		t.Fatalf("no line of output within %v", wait)
		return ""
	}
}

// startWithPipe starts c with its stdout on a pipe whose lines it returns.
func startWithPipe(t *testing.T, c *exec.Cmd) <-chan string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout = w
	c.Stderr = testWriter{t}
	err = c.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	return lines(r)
}

// testWriter logs a process's stderr in the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("stderr: %s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func (z *zkr) testLockExcludes(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ch := lines(r)
	var cmds []*exec.Cmd
	for range 2 {
		c := z.cmd("lock", "-zk", z.addr, "/x", "--", "sh", "-c", "echo in; sleep 1; echo out")
		c.Stdout, c.Stderr = w, testWriter{t}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	w.Close()
	for i, c := range cmds {
		if code := waitExit(t, c); code != 0 {
			t.Errorf("zkr %d exited with %d, want 0", i, code)
		}
	}
	var got []string
	for l := range ch {
		got = append(got, l)
	}
	if want := "in out in out"; strings.Join(got, " ") != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

func (z *zkr) testExpiry(t *testing.T) {
	p, err := testkit.NewProxy(z.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The command ignores SIGTERM, so it takes the SIGKILL after -grace.
	first := z.cmd("lock", "-zk", p.Addr(), "-session", "2s", "-grace", "1s", "/y", "--",
		"sh", "-c", `trap '' TERM; echo "$ZKR_LOCK_NODE $ZKR_LOCK_TOKEN"; exec sleep 60`)
	out1 := startWithPipe(t, first)
	held := strings.Fields(next(t, out1))
	if len(held) != 2 {
		t.Fatalf("first command's line %q, want node and token", held)
	}
	second := z.cmd("lock", "-zk", z.addr, "/y", "--", "sh", "-c", `echo "$ZKR_LOCK_TOKEN"`)
	out2 := startWithPipe(t, second)

	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	conn, err := zk.Connect(ctx, []string{z.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, st, err := conn.Get(ctx, held[0])
	if err != nil {
		t.Fatalf("the first holder's node: %v", err)
	}
	if err := p.ExpireSession(ctx, st.EphemeralOwner); err != nil {
		t.Fatalf("expire the first holder's session: %v", err)
	}

	if code := waitExit(t, first); code != 128+int(syscall.SIGKILL) {
		t.Errorf("first zkr exited with %d, want %d (its command killed after the grace)", code, 128+int(syscall.SIGKILL))
	}
	token := next(t, out2)
	if code := waitExit(t, second); code != 0 {
		t.Errorf("second zkr exited with %d, want 0", code)
	}
	t1, _ := strconv.ParseInt(held[1], 10, 64)
	t2, err := strconv.ParseInt(token, 10, 64)
	if err != nil || t2 <= t1 {
		t.Errorf("second token %q, want a number above the first's %d", token, t1)
	}
	for range out1 {
	}
	for range out2 {
	}
}

func (z *zkr) testExitStatus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String() // nothing listens there once closed
	ln.Close()
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"no servers", []string{"lock", "/x", "--", "true"}, 2},
		{"relative path", []string{"lock", "-zk", z.addr, "x", "--", "true"}, 2},
		{"bad path", []string{"holders", "-zk", z.addr, "/a//b"}, 2},
		{"root", []string{"queue", "len", "-zk", z.addr, "/"}, 2},
		{"unknown flag", []string{"holders", "-zk", z.addr, "-nope", "/x"}, 2},
		{"bad output", []string{"holders", "-zk", z.addr, "-o", "xml", "/x"}, 2},
		{"no command", []string{"lock", "-zk", z.addr, "/x", "--"}, 2},
		{"unknown queue verb", []string{"queue", "-zk", z.addr, "push", "/q"}, 2},
		{"unknown subcommand", []string{"unlock"}, 2},
		{"a relative chroot", []string{"holders", "-zk", z.addr + "/apps/", "/x"}, 2},
		{"an empty server", []string{"queue", "len", "-zk", z.addr + ",", "/q"}, 2},
		{"-tls-cert without -tls-key", []string{"holders", "-zk", z.addr, "-tls-cert", "/dev/null", "/x"}, 2},
		{"a missing -tls-ca", []string{"holders", "-zk", z.addr, "-tls-ca", "/nonexistent/ca.pem", "/x"}, 2},
		{"a -tls-ca without a certificate", []string{"holders", "-zk", z.addr, "-tls-ca", "/dev/null", "/x"}, 2},
		{"no server answers", []string{"lock", "-zk", dead, "-connect-timeout", "1s", "/x", "--", "true"}, 3},
		{"no server answers a queue", []string{"queue", "len", "-zk", dead, "-connect-timeout", "1s", "/q"}, 3},
		{"command's status", []string{"lock", "-zk", z.addr, "/x", "--", "sh", "-c", "exit 7"}, 7},
		{"command not found", []string{"lock", "-zk", z.addr, "/x", "--", "/nonexistent/cmd"}, 127},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := z.run(t, tt.args...)
			if code != tt.want {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.want, stderr)
			}
			if tt.want == 3 || (tt.want == 2 && tt.name != "unknown subcommand") {
				if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasPrefix(stderr, "zkr ") {
					t.Errorf("stderr %q, want one line starting with \"zkr \"", stderr)
				}
			}
		})
	}
}

func (z *zkr) testQueue(t *testing.T) {
	q := func(want string, args ...string) {
		t.Helper()
		stdout, stderr, code := z.run(t, append([]string{"queue", args[0], "-zk", z.addr}, args[1:]...)...)
		if code != 0 || stdout != want {
			t.Errorf("queue %q: status %d, stdout %q, want 0 and %q; stderr:\n%s", args, code, stdout, want, stderr)
		}
	}
	q("", "offer", "/q", "a")
	q("", "offer", "/q", "b")
	q("2\n", "len", "/q")
	q("a\n", "take", "/q")
	q(`{"data":"b"}`+"\n", "take", "-o", "json", "/q")
	q(`{"len":0}`+"\n", "len", "-o", "json", "/q")

	// take waits for an item.
	take := z.cmd("queue", "take", "-zk", z.addr, "/q")
	out := startWithPipe(t, take)
	q("", "offer", "/q", "late")
	if got := next(t, out); got != "late" {
		t.Errorf("waiting take got %q, want \"late\"", got)
	}
	if code := waitExit(t, take); code != 0 {
		t.Errorf("waiting take exited with %d", code)
	}
	for range out {
	}

	// A queue of 3 shards: len counts them all; another number is refused.
	q("", "offer", "-shards", "3", "/sq", "a")
	q("", "offer", "-shards", "3", "/sq", "b")
	q("2\n", "len", "-shards", "3", "/sq")
	if _, _, code := z.run(t, "queue", "take", "-zk", z.addr, "-shards", "2", "/sq"); code != 1 {
		t.Errorf("take with another number of shards: status %d, want 1", code)
	}
	if stdout, _, code := z.run(t, "queue", "take", "-zk", z.addr, "-shards", "3", "/sq"); code != 0 || stdout != "a\n" && stdout != "b\n" {
		t.Errorf("take of a sharded queue: status %d, stdout %q, want 0 and a or b", code, stdout)
	}
	if _, _, code := z.run(t, "queue", "len", "-zk", z.addr, "-shards", "0", "/sq"); code != 2 {
		t.Errorf("-shards 0: status %d, want 2", code)
	}
}

func (z *zkr) testElect(t *testing.T) {
	observe := z.cmd("elect", "-observe", "-zk", z.addr, "-o", "json", "/e")
	seen := startWithPipe(t, observe)
	if got := next(t, seen); got != `{"leader":null}` {
		t.Errorf("first observed %q, want a vacant leader", got)
	}

	leader := z.cmd("elect", "-zk", z.addr, "/e", "node-1", "--",
		"sh", "-c", `trap 'echo bye; exit 3' TERM; printf '%s\t%s\t%s\n' "$ZKR_ELECT_ID" "$ZKR_ELECT_NODE" "$ZKR_ELECT_TOKEN"; while :; do sleep 0.1; done`)
	out := startWithPipe(t, leader)
	term := next(t, out)
	if !strings.HasPrefix(term, "node-1\t/e/") {
		t.Fatalf("leader's command printed %q, want node-1, its node and token", term)
	}
	if got := next(t, seen); !strings.HasPrefix(got, `{"leader":"node-1",`) {
		t.Errorf("observed %q, want node-1 leading", got)
	}
	stdout, stderr, code := z.run(t, "holders", "-election", "-zk", z.addr, "/e")
	if code != 0 || stdout != term+"\n" {
		t.Errorf("holders -election: status %d, stdout %q, want %q; stderr:\n%s", code, stdout, term+"\n", stderr)
	}

	// SIGTERM to zkr goes to the command; zkr resigns and exits with its status.
	leader.Process.Signal(syscall.SIGTERM)
	if got := next(t, out); got != "bye" {
		t.Errorf("leader's command printed %q after SIGTERM, want bye", got)
	}
	if code := waitExit(t, leader); code != 3 {
		t.Errorf("leader zkr exited with %d, want the command's 3", code)
	}
	if got := next(t, seen); got != `{"leader":null}` {
		t.Errorf("observed %q after resigning, want a vacant leader", got)
	}
	observe.Process.Signal(os.Interrupt)
	if code := waitExit(t, observe); code != 0 {
		t.Errorf("observer exited with %d after SIGINT, want 0", code)
	}
	for range seen {
	}
	for range out {
	}
}

// testSharedHolders: two readers hold a read/write lock and two of three
// leases of a semaphore are held; zkr holders lists exactly those.
func (z *zkr) testSharedHolders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := zk.Connect(ctx, []string{z.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var readers []string
	for range 2 {
		rw, err := rwlock.New(conn, "/rw")
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		g, err := rw.ReadLock().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The id column is what the node stores, "-" for nothing.
		data, _, err := conn.Get(ctx, g.Node())
		if err != nil {
			t.Fatal(err)
		}
		id := cmp.Or(string(data), "-")
		readers = append(readers, id+"\t"+g.Node()+"\t"+strconv.FormatInt(g.Token(), 10)+"\n")
	}
	sem, err := semaphore.New(conn, "/sem", 3, semaphore.WithID("s-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer sem.Close()
	ls, err := sem.AcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := z.run(t, "holders", "-rwlock", "-zk", z.addr, "/rw")
	if code != 0 || stdout != readers[0]+readers[1] {
		t.Errorf("holders -rwlock: status %d, stdout %q, want %q; stderr:\n%s", code, stdout, readers[0]+readers[1], stderr)
	}
	stdout, stderr, code = z.run(t, "holders", "-semaphore", "-o", "json", "-zk", z.addr, "/sem")
	if code != 0 || strings.Count(stdout, "\n") != 2 {
		t.Errorf("holders -semaphore: status %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	for _, l := range ls {
		if want := fmt.Sprintf(`{"id":"s-1","node":%q,"token":%d}`, l.Node(), l.Token()); !strings.Contains(stdout, want) {
			t.Errorf("holders -semaphore: %q lacks %s", stdout, want)
		}
	}
	// A lock node another client made (Curator's name) with its id as
	// its data: zkr shows that id.
	node, err := conn.Create(ctx, "/lk/_c_00000000-0000-0000-0000-000000000000-lock-", []byte("proc-7"), zk.ModeEphemeralSequential)
	if errors.Is(err, zk.ErrNoNode) {
		if _, err = conn.Create(ctx, "/lk", nil, zk.ModePersistent); err == nil {
			node, err = conn.Create(ctx, "/lk/_c_00000000-0000-0000-0000-000000000000-lock-", []byte("proc-7"), zk.ModeEphemeralSequential)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := conn.Get(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = z.run(t, "holders", "-zk", z.addr, "/lk")
	if want := fmt.Sprintf("proc-7\t%s\t%d\n", node, st.Czxid); code != 0 || stdout != want {
		t.Errorf("holders: status %d, stdout %q, want %q; stderr:\n%s", code, stdout, want, stderr)
	}
	if _, _, code := z.run(t, "holders", "-rwlock", "-semaphore", "-zk", z.addr, "/rw"); code != 2 {
		t.Errorf("holders -rwlock -semaphore: status %d, want 2", code)
	}
}

// testServer: zkr server serves on the address it prints until SIGINT or
// SIGTERM, exits 0, and the nodes in its -data directory are there on
// the next run.
func (z *zkr) testServer(t *testing.T) {
	ctx := t.Context()
	data := t.TempDir()
	for i, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		c := z.cmd("server", "-port", "0", "-data", data)
		out := startWithPipe(t, c)
		addr := next(t, out)
		conn, err := zk.Connect(ctx, []string{addr})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			_, err = conn.Create(ctx, "/dev", []byte("kept"), zk.ModePersistent)
		} else if data, _, gerr := conn.Get(ctx, "/dev"); gerr != nil || string(data) != "kept" {
			err = fmt.Errorf("second run: /dev = %q, %v", data, gerr)
		}
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		c.Process.Signal(sig)
		if code := waitExit(t, c); code != 0 {
			t.Errorf("zkr server exited with %d after %v, want 0", code, sig)
		}
		for range out {
		}
		if _, err := testkit.FourLetterWord(ctx, addr, "srvr"); err == nil {
			t.Errorf("%s still serves after zkr server exited", addr)
		}
	}
}

// testMissingPath: the commands that only read a path say so when it does
// not exist, and exit 3.
func (z *zkr) testMissingPath(t *testing.T) {
	for _, args := range [][]string{
		{"holders"}, {"holders", "-election"}, {"holders", "-rwlock"}, {"holders", "-semaphore"}, {"queue", "len"},
	} {
		stdout, stderr, code := z.run(t, append(args, "-zk", z.addr, "/missing")...)
		if code != 3 || stdout != "" || !strings.Contains(stderr, "no such path: /missing\n") {
			t.Errorf("%q on a missing path: status %d, stdout %q, stderr %q; want 3 and \"no such path: /missing\"", args, code, stdout, stderr)
		}
	}
	if _, _, code := z.run(t, "holders", "-zk", z.addr, "/zookeeper"); code != 0 {
		t.Errorf("holders of a path with no holders: status %d, want 0", code)
	}
}
