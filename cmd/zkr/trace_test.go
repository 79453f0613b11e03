package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/observers"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// zkr trace renders what a service recorded: a lock taken and released on
// the simulator, recorded with observers.WithRecording.
func TestTrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	dir := t.TempDir()
	file := filepath.Join(dir, "rec.jsonl")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	tf := observers.NewTraceFile(observers.WithRecording(f), observers.WithKeep(0))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tf))
	sim := testkit.NewSim()
	defer sim.Close()
	l, err := lock.New(sim.Connect(), "/svc/lock", lock.WithID("svc-1"), lock.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	obs := tf.Observe(l)
	if _, err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close()
	select {
	case <-obs.Done():
	case <-ctx.Done():
		t.Fatal("observer did not stop")
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil || tf.Err() != nil {
		t.Fatal(err, tf.Err())
	}

	html, js := filepath.Join(dir, "out.html"), filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"trace", file, "-html", html, "-trace-json", js}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-lane="svc-1"`, "<h2>lock /svc/lock</h2>", "<span>lock.acquire /svc/lock</span>", `class="sp client`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if b, err := os.ReadFile(js); err != nil || !bytes.Contains(b, []byte(`"cat":"span"`)) {
		t.Errorf("trace JSON without spans (%v)", err)
	}
	if !strings.Contains(stdout.String(), "wrote "+html+": ") {
		t.Errorf("stdout %q", stdout.String())
	}

	// Cut short: rendered up to the cut, with a warning.
	b, _ := os.ReadFile(file)
	cut := filepath.Join(dir, "cut.jsonl")
	os.WriteFile(cut, b[:len(b)-10], 0o644)
	stderr.Reset()
	if code := run([]string{"trace", "-html", html, cut}, &stdout, &stderr, nil); code != 0 || !strings.Contains(stderr.String(), "rendering what came before it") {
		t.Errorf("cut recording: exit %d, stderr %q", code, stderr.String())
	}

	for _, args := range [][]string{{"trace", file}, {"trace", "-html", html}, {"trace", file, file, "-html", html}, {"trace", "-bogus", file}} {
		stderr.Reset()
		if code := run(args, &stdout, &stderr, nil); code != exitUsage || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line", args, code, stderr.String())
		}
	}
}
