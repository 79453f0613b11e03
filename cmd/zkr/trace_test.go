package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	dir := t.TempDir()
	file := filepath.Join(dir, "rec.jsonl")
	sim := testkit.NewSim()
	defer sim.Close()
	record(t, sim, file, "svc-1")

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

	for _, args := range [][]string{{"trace", file}, {"trace", "-html", html}, {"trace", "-bogus", file}} {
		stderr.Reset()
		if code := run(args, &stdout, &stderr, nil); code != exitUsage || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line", args, code, stderr.String())
		}
	}
}

// record writes to file what a process does with a lock: a handle with
// id takes it and lets it go, recorded with observers.WithRecording.
func record(t *testing.T, sim *testkit.Sim, file, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	tf := observers.NewTraceFile(observers.WithRecording(f), observers.WithKeep(0))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tf))
	l, err := lock.New(sim.Connect(), "/svc/lock", lock.WithID(id), lock.WithTracerProvider(tp))
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
}

// TestTraceMerges: three processes of one service, each with a handle
// named "worker", take the lock one after another; zkr trace of their
// three recordings shows one timeline with a lane per process.
func TestTraceMerges(t *testing.T) {
	dir := t.TempDir()
	sim := testkit.NewSim()
	defer sim.Close()
	var files []string
	for _, name := range []string{"a", "b", "c"} {
		files = append(files, filepath.Join(dir, name+".jsonl"))
		record(t, sim, files[len(files)-1], "worker")
	}
	js := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"trace", "-trace-json", js}, files...), &stdout, &stderr, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []struct {
			Name, Cat string
			Ts        float64
			Pid, Tid  int
			Args      struct{ Name string }
		}
	}
	if err := json.Unmarshal(b, &trace); err != nil {
		t.Fatal(err)
	}
	// Each process's lane, and when it took the lock: a, then b, then c.
	lanes := map[[2]int]string{}
	type grant struct {
		lane string
		ts   float64
	}
	var took []grant
	for _, ev := range trace.TraceEvents {
		switch {
		case ev.Name == "thread_name":
			lanes[[2]int{ev.Pid, ev.Tid}] = ev.Args.Name
		case ev.Name == "ELECTED_COMPLETE" && ev.Cat == "event":
			took = append(took, grant{lanes[[2]int{ev.Pid, ev.Tid}], ev.Ts})
		}
	}
	slices.SortFunc(took, func(x, y grant) int { return cmp.Compare(x.ts, y.ts) })
	var order []string
	for _, g := range took {
		order = append(order, g.lane)
	}
	if want := []string{"a/worker", "b/worker", "c/worker"}; !slices.Equal(order, want) {
		t.Errorf("grants on the merged timeline %v, want %v", took, want)
	}
	events := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		tf, err := observers.ReadRecording(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		events += len(tf.Records())
	}
	if want := fmt.Sprintf("wrote %s: %d events, ", js, events); !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout %q, want %q: every event of the three recordings", stdout.String(), want)
	}

	// A recording cut short is merged up to the cut; the others whole.
	b, _ = os.ReadFile(files[0])
	os.WriteFile(files[0], b[:len(b)-10], 0o644)
	html := filepath.Join(dir, "out.html")
	stderr.Reset()
	if code := run(append([]string{"trace", "-html", html}, files...), &stdout, &stderr, nil); code != 0 ||
		!strings.Contains(stderr.String(), files[0]+": line ") {
		t.Fatalf("a cut recording: exit %d, stderr %q", code, stderr.String())
	}
	page, _ := os.ReadFile(html)
	for _, lane := range []string{"a/worker", "b/worker", "c/worker"} {
		if !strings.Contains(string(page), `data-lane="`+lane+`"`) {
			t.Errorf("page lacks the lane %s", lane)
		}
	}
}
