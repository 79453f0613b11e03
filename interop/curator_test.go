package interop

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// The jars CuratorPeer runs on, from Debian's libcurator-*-java and
// libzookeeper-java (with their dependencies guava and slf4j), and
// curator-x-discovery with Jackson (libcurator-discovery-java).
var curatorJars = []string{
	"/usr/share/java/curator-recipes.jar",
	"/usr/share/java/curator-framework.jar",
	"/usr/share/java/curator-client.jar",
	"/usr/share/java/zookeeper.jar",
	"/usr/share/java/zookeeper-jute.jar",
	"/usr/share/java/guava.jar",
	"/usr/share/java/slf4j-api.jar",
	"/usr/share/java/slf4j-simple.jar",
	"/usr/share/java/curator-x-discovery.jar",
	"/usr/share/java/jackson-databind.jar",
	"/usr/share/java/jackson-core.jar",
	"/usr/share/java/jackson-annotations.jar",
}

// step is how long a single step may take: a Curator command, a handoff, a
// JVM start. Each is normally well under a second.
const step = 15 * time.Second

// jvmStart is how long the peer may take to start and connect.
const jvmStart = 60 * time.Second

// needCurator returns java and the class path for CuratorPeer, or skips the
// test when they are missing (fails it when ZK_REQUIRED=1).
func needCurator(t *testing.T) (java, classPath string) {
	t.Helper()
	var missing []string
	java, err := exec.LookPath("java")
	if err != nil {
		missing = append(missing, "java on PATH")
	}
	for _, jar := range curatorJars {
		if _, err := os.Stat(jar); err != nil {
			missing = append(missing, jar)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("Apache Curator is not installed: missing %s (install with "+
			"`apt-get install --no-install-recommends default-jre-headless libzookeeper-java "+
			"libcurator-recipes-java libcurator-framework-java libcurator-client-java libcurator-discovery-java`)",
			strings.Join(missing, ", "))
		if os.Getenv("ZK_REQUIRED") == "1" {
			t.Fatal(msg + "; ZK_REQUIRED=1, so this is a failure")
		}
		t.Skip(msg + " (set ZK_REQUIRED=1 to make this a failure)")
	}
	return java, strings.Join(curatorJars, string(os.PathListSeparator))
}

// curatorPeer is a running CuratorPeer.java: one Curator client doing one
// recipe, driven over its stdin.
type curatorPeer struct {
	t       *testing.T
	name    string
	session string    // "0x…", as the server's four-letter words print it
	t0      time.Time // the test's start, for the timeline in the log
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string // stdout, one line each; closed at EOF

	mu   sync.Mutex
	seen []string // every line read so far
	err  lockedBuffer
}

// startCurator starts a Curator peer for role ("mutex", "latch" or
// "selector") on dir, with participant id id, and waits until it is
// connected. It quits when the test ends.
func startCurator(t *testing.T, t0 time.Time, addr, role, dir, id string) *curatorPeer {
	t.Helper()
	p := startJava(t, t0, id, "CuratorPeer.java", addr, role, dir, id)
	t.Logf("%s: Curator %s on %s, session %s, up in %v", id, role, dir, p.session, time.Since(t0).Round(time.Millisecond))
	return p
}

// startJava starts the single-file Java program java/<src> with args,
// named name in the log, and waits until it prints CONNECTED. It quits
// when the test ends.
func startJava(t *testing.T, t0 time.Time, name, src string, args ...string) *curatorPeer {
	t.Helper()
	java, cp := needCurator(t)
	abs, err := filepath.Abs(filepath.Join("java", src))
	if err != nil {
		t.Fatal(err)
	}
	p := &curatorPeer{t: t, name: name, t0: t0, lines: make(chan string, 1024)}
	p.cmd = exec.Command(java, append([]string{
		"-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dorg.slf4j.simpleLogger.logFile=System.err",
		"-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn=error",
		"-cp", cp, abs}, args...)...)
	p.cmd.Stderr = &p.err
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", src, err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(p.quit)
	// A JVM's start (and Curator's first session) is the slowest step,
	// and the one a loaded machine slows most (over 15 s seen in CI with
	// other tests beside it).
	rest, ok := p.awaitWithin("CONNECTED", jvmStart)
	if !ok {
		p.t.Fatalf("%s: no CONNECTED from the Curator peer within %v", p.name, jvmStart)
	}
	p.session = "0x" + rest
	return p
}

// quit asks the peer to quit and waits for it (killing it if it does not
// go within a step), and logs its stderr if the test failed.
func (p *curatorPeer) quit() {
	fmt.Fprintln(p.stdin, "quit")
	p.stdin.Close()
	deadline := time.After(step)
	for open := true; open; {
		select {
		case _, open = <-p.lines:
		case <-deadline:
			p.t.Errorf("%s: Curator peer did not quit within %v; killing it", p.name, step)
			p.cmd.Process.Kill()
			deadline = nil
		}
	}
	if err := p.cmd.Wait(); err != nil {
		p.t.Errorf("%s: Curator peer: %v", p.name, err)
	}
	if p.t.Failed() {
		p.t.Logf("%s: Curator peer stderr:\n%s", p.name, p.err.String())
	}
}

// send writes one command to the peer.
func (p *curatorPeer) send(cmd string) {
	p.t.Helper()
	p.t.Logf("%s %8s > %s", p.name, p.since(), cmd)
	if _, err := fmt.Fprintln(p.stdin, cmd); err != nil {
		p.t.Fatalf("%s: sending %q: %v", p.name, cmd, err)
	}
}

// await reads lines until one whose first word is word and returns the rest
// of it. It fails the test on an ERROR line, on EOF, and after a step.
func (p *curatorPeer) await(word string) string {
	p.t.Helper()
	rest, ok := p.awaitWithin(word, step)
	if !ok {
		p.t.Fatalf("%s: no %s from the Curator peer within %v", p.name, word, step)
	}
	return rest
}

// awaitWithin is await with a deadline of d, and false when it passes.
func (p *curatorPeer) awaitWithin(word string, d time.Duration) (string, bool) {
	p.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("%s: Curator peer exited while we waited for %s; stderr:\n%s", p.name, word, p.err.String())
			}
			p.t.Logf("%s %8s < %s", p.name, p.since(), line)
			p.mu.Lock()
			p.seen = append(p.seen, line)
			p.mu.Unlock()
			first, rest, _ := strings.Cut(line, " ")
			if first == "ERROR" {
				p.t.Fatalf("%s: Curator peer: %s", p.name, line)
			}
			if first == word {
				return rest, true
			}
		case <-deadline:
			return "", false
		}
	}
}

// ask sends cmd and returns the rest of the answer line starting with word.
// Every line the peer printed before the answer has then been read.
func (p *curatorPeer) ask(cmd, word string) string {
	p.t.Helper()
	p.send(cmd)
	return p.await(word)
}

// saw counts the lines read so far whose first word is word.
func (p *curatorPeer) saw(word string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, line := range p.seen {
		if first, _, _ := strings.Cut(line, " "); first == word {
			n++
		}
	}
	return n
}

func (p *curatorPeer) since() string {
	return fmt.Sprintf("%.1fms", float64(time.Since(p.t0).Microseconds())/1000)
}

// lockedBuffer is a bytes.Buffer safe for the exec copier and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// connect opens a Go connection to addr, closed when the test ends.
func connect(t *testing.T, addr string) zk.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), step)
	defer cancel()
	c, err := zk.Connect(ctx, []string{addr}, zk.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testCtx bounds a whole test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// curatorName is Curator's protected node name: _c_<uuid>-<marker><seq10>.
func curatorName(marker string) *regexp.Regexp {
	return regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-` +
		regexp.QuoteMeta(marker) + `[0-9]{10}$`)
}

// checkName fails the test unless node's last segment has Curator's format.
func checkName(t *testing.T, whose, node, marker string) {
	t.Helper()
	if re := curatorName(marker); !re.MatchString(zk.Base(node)) {
		t.Errorf("%s node %q does not match %s", whose, node, re)
	}
}

// children lists dir, sorted by name (the sequence suffixes share a
// format, so this is queue order for one marker).
func children(t *testing.T, ctx context.Context, c zk.Conn, dir string) []string {
	t.Helper()
	kids, _, err := c.Children(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(kids, bySeq)
	return kids
}

// bySeq orders node names by their trailing 10-digit sequence.
func bySeq(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) }

// awaitChildren waits, on child watches, until dir has n children, and
// returns them in queue order.
func awaitChildren(t *testing.T, ctx context.Context, c zk.Conn, dir string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	for {
		kids, _, ch, err := c.ChildrenW(ctx, dir)
		if err != nil {
			t.Fatalf("waiting for %d children of %s: %v", n, dir, err)
		}
		if len(kids) == n {
			slices.SortFunc(kids, bySeq)
			return kids
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s has children %v, not %d, after %v", dir, kids, n, step)
		}
	}
}

// awaitWatch waits until session (as "0x…") has a watch on node, asking
// the server with the four-letter word wchp (each answer is one round trip
// of its own; there is no notification for a watch being set). A test calls
// it before it makes the watch fire, so the handoff it checks is the one
// through the notification, not through a read that found the node gone.
func awaitWatch(t *testing.T, ctx context.Context, addr, node, session string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := testkit.FourLetterWord(ctx, addr, "wchp")
		if err != nil {
			t.Fatalf("waiting for %s's watch on %s: %v", session, node, err)
		}
		// A Curator waiter leaves a data watch on node; ours, an exists
		// watch on node's release or hold mark (and a child watch on
		// node, which wchp does not list: so once a hold mark is made,
		// which fires that exists watch, wchp shows nothing of ours).
		w := func(p string) bool { return watchers(out, p)[session] }
		if w(node) || w(contention.ReleaseMark(node)) || w(contention.HoldMark(node)) {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s's watch on %s: %v", session, node, ctx.Err())
		}
	}
}

// watchers parses wchp's answer ("path" lines, each followed by one
// "\tsession" line per watcher) into the sessions watching node.
func watchers(wchp, node string) map[string]bool {
	set := make(map[string]bool)
	in := false
	for _, line := range strings.Split(wchp, "\n") {
		if s, ok := strings.CutPrefix(line, "\t"); ok {
			if in {
				set[s] = true
			}
			continue
		}
		in = line == node
	}
	return set
}

// sessionHex formats a Go connection's session as wchp prints it.
func sessionHex(c zk.Conn) string { return fmt.Sprintf("0x%x", uint64(c.SessionID())) }

// ms formats a duration in milliseconds for the log.
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
