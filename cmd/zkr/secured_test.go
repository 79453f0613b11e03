package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// secret is in every credential the secured tests use: no output of zkr
// may show it.
const secret = "s3cret-pw"

// runEnv is run with env added to zkr's environment.
func (z *zkr) runEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := z.cmd(args...)
	c.Env = append(c.Env, env...)
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, c)
	return stdout.String(), stderr.String(), code
}

// checkNoSecret fails the test if any of outs shows the password.
func checkNoSecret(t *testing.T, outs ...string) {
	t.Helper()
	for _, o := range outs {
		if strings.Contains(o, secret) {
			t.Errorf("output shows the password:\n%s", o)
		}
	}
}

// oneLine fails the test unless stderr is one line starting "zkr CMD: "
// and containing want.
func oneLine(t *testing.T, stderr, cmd, want string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "zkr "+cmd+": ") || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want one line \"zkr %s: ...%s...\"", stderr, cmd, want)
	}
}

// testSecured: alice (ZKR_AUTH digest) holds a lock under a chroot; bob,
// another digest identity, reads its holder but cannot take the lock;
// alice still holds. Paths under the chroot are shown relative to it.
func (z *zkr) testSecured(t *testing.T) {
	alice := []string{"ZKR_AUTH=digest:alice:" + secret}
	bob := []string{"ZKR_AUTH=digest:bob:" + secret + "-b"}
	chrooted := z.addr + "/apps/billing"

	holder := z.cmd("lock", "-zk", chrooted, "/locks/orders", "--", "sh", "-c", `echo "$ZKR_LOCK_NODE"; cat >/dev/null`)
	holder.Env = append(holder.Env, alice...)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var holderErr bytes.Buffer
	holder.Stdout, holder.Stderr = w, &holderErr
	err = holder.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	out := lines(r)
	node := next(t, out)
	if !strings.HasPrefix(node, "/locks/orders/_c_") {
		t.Fatalf("alice's ZKR_LOCK_NODE %q, want a node under the chroot-relative /locks/orders", node)
	}

	// bob, without a chroot, sees alice's node under /apps/billing: world read.
	stdout, stderr, code := z.runEnv(t, bob, "holders", "-zk", z.addr, "/apps/billing/locks/orders")
	if f := strings.Split(strings.TrimSpace(stdout), "\t"); code != 0 || len(f) != 3 || f[1] != "/apps/billing"+node {
		t.Errorf("bob's holders: status %d, stdout %q, want alice's node /apps/billing%s; stderr:\n%s", code, stdout, node, stderr)
	}
	checkNoSecret(t, stdout, stderr)
	// bob's lock is refused by the ACL of alice's lock directory, at once.
	// (bob has no chroot: he could not open one at /apps/billing, whose
	// parent refuses him CREATE; that is another refusal, not the lock's.)
	start := time.Now()
	stdout, stderr, code = z.runEnv(t, bob, "lock", "-zk", z.addr, "/apps/billing/locks/orders", "--", "echo", "bob holds")
	if code != exitError || stdout != "" {
		t.Errorf("bob's lock: status %d, stdout %q, want %d and nothing run", code, stdout, exitError)
	}
	oneLine(t, stderr, "lock", "not authenticated")
	if strings.Contains(stderr, "chroot") {
		t.Errorf("bob's lock was refused its chroot, not the lock: %s", stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("bob's refusal took %v", d)
	}
	checkNoSecret(t, stdout, stderr)
	// A queue item in alice's directory: refused too.
	_, stderr, code = z.runEnv(t, bob, "queue", "offer", "-zk", z.addr, "/apps/billing/locks/orders", "x")
	if code != exitError {
		t.Errorf("bob's offer: status %d, want %d", code, exitError)
	}
	oneLine(t, stderr, "queue", "not authenticated")

	// alice still holds, and sees her node relative to her chroot.
	stdout, stderr, code = z.runEnv(t, alice, "holders", "-zk", chrooted, "/locks/orders")
	if f := strings.Split(strings.TrimSpace(stdout), "\t"); code != 0 || len(f) != 3 || f[1] != node {
		t.Errorf("alice's holders: status %d, stdout %q, want %s; stderr:\n%s", code, stdout, node, stderr)
	}
	checkNoSecret(t, stdout, stderr)

	stdin.Close() // the command reads EOF and exits; zkr releases
	if code := waitExit(t, holder); code != 0 {
		t.Errorf("alice's zkr exited with %d, want 0; stderr:\n%s", code, holderErr.String())
	}
	for range out {
	}
	checkNoSecret(t, holderErr.String())
	// Released: bob sees no holder.
	stdout, stderr, code = z.runEnv(t, bob, "holders", "-zk", z.addr, "/apps/billing/locks/orders")
	if code != 0 || stdout != "" {
		t.Errorf("holders after alice's release: status %d, stdout %q, want none; stderr:\n%s", code, stdout, stderr)
	}
}

// testAuthFailed: a credential the server refuses (an unknown scheme) is a
// one-line error, well within 2 s, not a wait for -connect-timeout.
func (z *zkr) testAuthFailed(t *testing.T) {
	start := time.Now()
	stdout, stderr, code := z.runEnv(t, []string{"ZKR_AUTH=nosuchscheme:" + secret}, "queue", "len", "-zk", z.addr, "-connect-timeout", "30s", "/q")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v, want under 2s", d)
	}
	if code != exitError {
		t.Errorf("status %d, want %d", code, exitError)
	}
	oneLine(t, stderr, "queue", "authentication failed")
	checkNoSecret(t, stdout, stderr)

	// A malformed ZKR_AUTH is bad usage, refused before anything is dialled.
	for _, auth := range []string{secret, ":" + secret, "digest:" + secret, "digest::" + secret, "digest:"} {
		stdout, stderr, code := z.runEnv(t, []string{"ZKR_AUTH=" + auth}, "queue", "len", "-zk", z.addr, "/q")
		if code != exitUsage {
			t.Errorf("ZKR_AUTH=%q: status %d, want %d", auth, code, exitUsage)
		}
		oneLine(t, stderr, "queue", "ZKR_AUTH")
		checkNoSecret(t, stdout, stderr)
	}
}

// testTLSFailures: -tls-ca against the plain-text server, and against a
// TLS server whose certificate the CA did not sign, are one-line errors
// naming TLS, within -connect-timeout.
func (z *zkr) testTLSFailures(t *testing.T) {
	dir := t.TempDir()
	ca, _ := selfSigned(t, dir, "ca")
	_, serverCert := selfSigned(t, dir, "other")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverCert}})
	if err != nil {
		t.Fatal(err)
	}
	var serving sync.WaitGroup
	serving.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serving.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(wait))
				io.Copy(io.Discard, c) // handshakes, then fails
			})
		}
	})
	defer serving.Wait()
	defer ln.Close()

	for _, tt := range []struct{ name, addr, want string }{
		{"a plain-text server", z.addr, "TLS"},
		{"an untrusted certificate", ln.Addr().String(), "certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, stderr, code := z.run(t, "queue", "len", "-zk", tt.addr, "-tls-ca", ca, "-connect-timeout", "5s", "/q")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v, want the TLS error within -connect-timeout 5s", d)
			}
			if code != exitError {
				t.Errorf("status %d, want %d", code, exitError)
			}
			oneLine(t, stderr, "queue", "TLS")
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q lacks %q", stderr, tt.want)
			}
		})
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 as dir/name.pem
// and returns its path and the certificate with its key.
func selfSigned(t *testing.T, dir, name string) (string, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
