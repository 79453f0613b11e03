package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// watching is zkr watch running in this process: its output lines, and
// how to stop it as a signal would.
type watching struct {
	lines <-chan string
	sigs  chan os.Signal
	code  chan int
}

func startWatch(t *testing.T, args ...string) *watching {
	t.Helper()
	r, w := io.Pipe()
	ch := make(chan string)
	go func() {
		defer close(ch)
		s := bufio.NewScanner(r)
		for s.Scan() {
			ch <- s.Text()
		}
	}()
	z := &watching{lines: ch, sigs: make(chan os.Signal, 1), code: make(chan int, 1)}
	go func() {
		code := run(append([]string{"watch"}, args...), w, testWriter{t}, z.sigs)
		w.Close()
		z.code <- code
	}()
	t.Cleanup(func() { z.stop(t) })
	return z
}

// stop interrupts zkr watch (SIGINT) and checks that it exits with 0.
func (z *watching) stop(t *testing.T) {
	select {
	case z.sigs <- syscall.SIGINT:
	default:
	}
	for range z.lines { // drain what is left, until its stdout closes
	}
	if code := <-z.code; code != 0 {
		t.Errorf("zkr watch exited with %d after SIGINT, want 0", code)
	}
}

// TestWatch: zkr watch prints the node once loaded, then a set, a
// deletion and a new node as they happen; -tree -o json the same for the
// nodes below, to -depth.
func TestWatch(t *testing.T) {
	srv := testkit.StartServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	conn, err := zk.Connect(ctx, []string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func(path, data string) {
		t.Helper()
		_, err := conn.Create(ctx, path, []byte(data), zk.ModePersistent)
		must(err)
	}
	set := func(path, data string) {
		t.Helper()
		_, err := conn.Set(ctx, path, []byte(data), zk.AnyVersion)
		must(err)
	}

	t.Run("a node", func(t *testing.T) {
		create("/n", "v0")
		z := startWatch(t, "-zk", srv.Addr(), "/n")
		want := func(line string) {
			t.Helper()
			if got := next(t, z.lines); got != line {
				t.Fatalf("line %q, want %q", got, line)
			}
		}
		want("added\t/n\t0\tv0")
		set("/n", "v1")
		want("updated\t/n\t1\tv1")
		set("/n", "two\nlines")
		want("updated\t/n\t2\t\"two\\nlines\"")
		must(conn.Delete(ctx, "/n", zk.AnyVersion))
		want("removed\t/n\t2\t\"two\\nlines\"")
	})

	t.Run("a tree, to a depth, in JSON", func(t *testing.T) {
		create("/t", "root")
		create("/t/a", "a0")
		create("/t/a/deep", "not followed")
		z := startWatch(t, "-zk", srv.Addr(), "-tree", "-depth", "1", "-o", "json", "/t")
		want := func(c change) {
			t.Helper()
			line := next(t, z.lines)
			var got change
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			if got != c {
				t.Fatalf("line %q, want %+v", line, c)
			}
		}
		want(change{"added", "/t", 0, "root"})
		want(change{"added", "/t/a", 0, "a0"})
		set("/t/a", "a1")
		want(change{"updated", "/t/a", 1, "a1"})
		create("/t/b", "b0")
		want(change{"added", "/t/b", 0, "b0"})
		set("/t/a/deep", "still not followed")
		set("/t", "root1")
		want(change{"updated", "/t", 1, "root1"})
	})
}

func TestWatchBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-zk", "127.0.0.1:1", "-depth", "2", "/x"},           // -depth without -tree
		{"-zk", "127.0.0.1:1", "-tree", "-depth", "-2", "/x"}, // a negative depth
		{"-zk", "127.0.0.1:1", "x"},                           // a relative path
		{"-zk", "127.0.0.1:1", "/x", "/y"},                    // two paths
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"watch"}, args...), &stdout, &stderr, nil)
		if code != exitUsage || stdout.Len() > 0 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("zkr watch %q: exit %d, stdout %q, stderr %q; want %d, nothing, one line", args, code, stdout.String(), stderr.String(), exitUsage)
		}
	}
}
