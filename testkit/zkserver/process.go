package zkserver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// Where Debian's libzookeeper-java puts the server. zookeeper.jar's manifest
// Class-Path pulls in netty, jackson, jetty, metrics and commons-* from the
// same folder; jute and an slf4j binding are not in it, so they are named.
var zkClassPath = []string{
	"/usr/share/java/zookeeper.jar",
	"/usr/share/java/zookeeper-jute.jar",
	"/usr/share/java/slf4j-simple.jar",
}

// The secure port's Netty needs these too; Debian's zookeeper.jar manifest
// lists Netty's buffer, common, handler and transport jars only.
var nettyClassPath = []string{
	"/usr/share/java/netty-codec.jar",
	"/usr/share/java/netty-resolver.jar",
}

const zkMainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// ErrNotInstalled is returned by Launch and LaunchEnsemble when java or
// the ZooKeeper jars are missing. testkit's StartServer and StartEnsemble skip
// the test on it unless the environment sets ZK_REQUIRED=1.
var ErrNotInstalled = errors.New("zkserver: ZooKeeper is not installed " +
	"(need java and /usr/share/java/zookeeper.jar; install with " +
	"`apt-get install --no-install-recommends libzookeeper-java default-jre-headless`)")

// findJava returns the java binary, or an error wrapping ErrNotInstalled.
func findJava() (string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: no java on PATH", ErrNotInstalled)
	}
	for _, jar := range zkClassPath {
		if _, err := os.Stat(jar); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
		}
	}
	return java, nil
}

// zkProcess is one ZooKeeper JVM: its config, its log and, while it runs, the
// child process. A process can be started again after it exited (Restart).
type zkProcess struct {
	name    string // for messages: "zookeeper" or "node 2"
	dir     string // holds zoo.cfg, data/ and zk.log
	addr    string // client address, 127.0.0.1:port; "" with noPlain
	jvmArgs []string

	tls        *serverTLS // nil: no secure port
	securePort int
	secureAddr string
	noPlain    bool // no plain-text client port (with tls only)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once the running child exited and was reaped
	want bool          // started and not killed since: it should be running
}

func (p *zkProcess) cfgPath() string { return filepath.Join(p.dir, "zoo.cfg") }
func (p *zkProcess) logPath() string { return filepath.Join(p.dir, "zk.log") }

// writeConfig writes zoo.cfg. servers are the "server.N=..." lines of an
// ensemble (none for a standalone server); myid is then this node's N.
func (p *zkProcess) writeConfig(cfg config, clientPort, myid int, servers []string) error {
	data := filepath.Join(p.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	tick := cfg.tick.Milliseconds()
	fmt.Fprintf(&b, "tickTime=%d\n", tick)
	// initLimit and syncLimit count ticks; keep them at about 10 s and 2 s
	// however short the tick, so a loaded machine does not break a quorum.
	fmt.Fprintf(&b, "initLimit=%d\n", max(10, 10000/tick))
	fmt.Fprintf(&b, "syncLimit=%d\n", max(5, 2000/tick))
	fmt.Fprintf(&b, "dataDir=%s\n", data)
	p.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))
	if p.tls != nil {
		b.WriteString(p.tls.configLines(p.securePort))
		p.secureAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.securePort))
	}
	if p.tls != nil && p.noPlain {
		p.addr = ""
	} else {
		fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", clientPort)
	}
	fmt.Fprintf(&b, "maxClientCnxns=0\n4lw.commands.whitelist=*\nadmin.enableServer=false\n")
	fmt.Fprintf(&b, "forceSync=%s\n", map[bool]string{true: "yes", false: "no"}[cfg.forceSync])
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=%d\n", 2*tick, cfg.maxSession.Milliseconds())
	for _, s := range servers {
		fmt.Fprintln(&b, s)
	}
	if len(servers) > 0 {
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(myid)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(p.cfgPath(), []byte(b.String()), 0o644)
}

// jvmArguments are the java arguments for cfg, without the config file.
func jvmArguments(cfg config) []string {
	args := []string{
		"-Xms32m", "-Xmx" + cfg.heap, "-XX:+UseSerialGC",
		"-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-Dzookeeper.jmx.log4j.disable=true",
	}
	if cfg.quickJIT {
		args = append(args, "-XX:TieredStopAtLevel=1")
	}
	if cfg.containerCheck > 0 {
		args = append(args, fmt.Sprintf("-Dznode.container.checkIntervalMs=%d", cfg.containerCheck.Milliseconds()))
	}
	if cfg.tls {
		// The secure port needs Netty; it then serves the plain port too.
		args = append(args, "-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory")
	}
	if cfg.superDigest != "" {
		args = append(args, "-Dzookeeper.DigestAuthenticationProvider.superDigest="+cfg.superDigest)
	}
	cp := zkClassPath
	if cfg.tls {
		cp = append(slices.Clip(cp), nettyClassPath...)
	}
	return append(args, "-cp", strings.Join(cp, ":"), zkMainClass)
}

// start launches the JVM. The child gets its own process group and, on
// Linux, SIGKILL when this process dies, so no server outlives a crashed or
// timed-out program or test binary.
func (p *zkProcess) start(java string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("zkserver: %s is already running", p.name)
		}
	}
	logf, err := os.OpenFile(p.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== zkserver: starting %s at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(java, append(append([]string(nil), p.jvmArgs...), p.cfgPath())...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("zkserver: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.want = cmd, done, true
	go func() {
		cmd.Wait() // the exit status says nothing useful: we kill it
		logf.Close()
		close(done)
	}()
	return nil
}

// exited returns a channel closed once the current child has exited.
func (p *zkProcess) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// wanted reports whether the process was started and not killed since; it
// may still have exited by itself.
func (p *zkProcess) wanted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.want
}

// kill sends SIGKILL and waits until the child is reaped. os.Process signals
// through a pidfd, so a pid reused by another process is never hit.
func (p *zkProcess) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.want = false
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill() // fails only when it already exited
	<-done
}

// waitServing polls `srvr` until the server answers with a Mode, on its
// secure port too when it has both kinds (ZooKeeper binds them one after
// the other). It fails at once if the JVM exits.
func (p *zkProcess) waitServing(ctx context.Context) error {
	exited := p.exited()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := p.mode(ctx); err == nil && p.secureServing(ctx) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("zkserver: %s exited while starting; log tail:\n%s", p.name, p.logTail(30))
		case <-ctx.Done():
			return fmt.Errorf("zkserver: %s not serving on %s: %w; log tail:\n%s", p.name, cmp.Or(p.addr, p.secureAddr), ctx.Err(), p.logTail(30))
		case <-tick.C:
		}
	}
}

// secureServing reports whether the secure port of a server that also has
// a plain one answers srvr (true without one of the two: mode asked it).
func (p *zkProcess) secureServing(ctx context.Context) bool {
	if p.tls == nil || p.addr == "" {
		return true
	}
	_, err := srvrField(ctx, p.secureAddr, p.tls.client, "Mode")
	return err == nil
}

// bindFailed reports whether the log says a port was taken: someone else
// grabbed one of the free ports between our probe and the JVM's bind.
func (p *zkProcess) bindFailed() bool {
	b, _ := os.ReadFile(p.logPath())
	return bytes.Contains(b, []byte("Address already in use"))
}

// logTail returns the last n lines of the server log.
func (p *zkProcess) logTail(n int) string {
	b, err := os.ReadFile(p.logPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// They are held open together so that no two are equal.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// serverMode is the Mode srvr reports for the server at addr
// ("standalone", "leader", "follower", "observer").
func serverMode(ctx context.Context, addr string) (string, error) {
	return srvrField(ctx, addr, nil, "Mode")
}

// mode is the process's serverMode, asked on its plain port, or over TLS
// when it has none.
func (p *zkProcess) mode(ctx context.Context) (string, error) {
	addr, cfg := p.adminAddr()
	return srvrField(ctx, addr, cfg, "Mode")
}

// zxid is the last zxid the process has applied, from srvr, asked as mode
// asks.
func (p *zkProcess) zxid(ctx context.Context) (int64, error) {
	addr, cfg := p.adminAddr()
	z, err := srvrField(ctx, addr, cfg, "Zxid")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(z, 0, 64)
}

// fourLetterWord sends word to the process as mode asks.
func (p *zkProcess) fourLetterWord(ctx context.Context, word string) (string, error) {
	addr, cfg := p.adminAddr()
	return fourLetterWord(ctx, addr, cfg, word)
}

// adminAddr is where the four-letter words go: the plain client port, or
// the secure one (with its client config) when there is no plain one.
func (p *zkProcess) adminAddr() (string, *tls.Config) {
	if p.addr == "" {
		return p.secureAddr, p.tls.client
	}
	return p.addr, nil
}

// serverZxid is the last zxid the server at addr has applied, from srvr.
func serverZxid(ctx context.Context, addr string) (int64, error) {
	z, err := srvrField(ctx, addr, nil, "Zxid")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(z, 0, 64)
}

// srvrField is the value of one "Name: value" line of srvr's reply from
// the server at addr; an error while the server does not serve. It gives
// up after a second: a starting server may accept the word and never
// answer it.
func srvrField(ctx context.Context, addr string, tlsCfg *tls.Config, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	reply, err := fourLetterWord(ctx, addr, tlsCfg, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(reply, "\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("zkserver: %s is not serving: %q", addr, strings.TrimSpace(reply))
}

// FourLetterWord sends one of ZooKeeper's four-letter words ("srvr", "stat",
// "mntr", "cons", "dump", "ruok", ...) to addr and returns the whole reply.
// Every word is allowed on servers started by this package. Without a
// deadline on ctx it gives up after 2 s.
func FourLetterWord(ctx context.Context, addr, word string) (string, error) {
	return fourLetterWord(ctx, addr, nil, word)
}

// FourLetterWordTLS is FourLetterWord on a secure client port (see
// WithTLS), with cfg (Server.TLSConfig).
func FourLetterWordTLS(ctx context.Context, addr string, cfg *tls.Config, word string) (string, error) {
	if cfg == nil {
		return "", fmt.Errorf("zkserver: FourLetterWordTLS with a nil config: %w", zkrecipes.ErrInvalidOption)
	}
	return fourLetterWord(ctx, addr, cfg, word)
}

func fourLetterWord(ctx context.Context, addr string, tlsCfg *tls.Config, word string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
	}
	var c net.Conn
	var err error
	if tlsCfg != nil {
		d := tls.Dialer{Config: tlsCfg}
		c, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(c); err != nil {
		return "", fmt.Errorf("zkserver: %s %s: %w", addr, word, err)
	}
	return b.String(), nil
}
