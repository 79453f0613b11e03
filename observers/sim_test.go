package observers_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/observers"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// watched is a lock with all three observers on it.
type watched struct {
	*lock.Lock
	log, timeline   bytes.Buffer
	reader          *sdkmetric.ManualReader
	logs, tl, stats *observers.Observer
}

func watch(t *testing.T, l *lock.Lock) *watched {
	t.Helper()
	w := &watched{Lock: l, reader: sdkmetric.NewManualReader()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	w.logs = observers.Log(l, zerolog.New(&w.log))
	w.tl = observers.Timeline(l, &w.timeline)
	var err error
	if w.stats, err = observers.Metrics(l, observers.WithMeterProvider(mp)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close()
		w.logs.Close()
		w.tl.Close()
		w.stats.Close()
	})
	return w
}

// close closes the lock and waits until the observers handled everything.
func (w *watched) close(t *testing.T) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*observers.Observer{w.logs, w.tl, w.stats} {
		waitDone(t, o)
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// types lists the timeline's event types, START aside (it is published as
// the lock is made, and may come before the observers subscribed).
func (w *watched) types(t *testing.T) []string {
	t.Helper()
	recs, err := observers.ReadTimeline(bytes.NewReader(w.timeline.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.Type != events.Start {
			out = append(out, r.Type.String())
		}
	}
	return out
}

func newLock(t *testing.T, sim *testkit.Sim, path string) *lock.Lock {
	t.Helper()
	l, err := lock.New(sim.Connect(), path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestObserversFollowALock(t *testing.T) {
	ctx := ctxT(t)
	sim := testkit.NewSim()
	defer sim.Close()
	w := watch(t, newLock(t, sim, "/app/locks/orders"))
	g, err := w.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w.close(t)

	want := []string{"OFFER_START", "OFFER_COMPLETE", "DETERMINE_START", "DETERMINE_COMPLETE",
		"ELECTED_START", "ELECTED_COMPLETE", "STOP_START", "STOP_COMPLETE"}
	if got := w.types(t); !slices.Equal(got, want) {
		t.Errorf("timeline %v\nwant     %v", got, want)
	}

	var held map[string]any
	lines := parseLines(t, w.log.Bytes())
	for _, l := range lines {
		if l["event"] == "ELECTED_COMPLETE" {
			held = l
		}
	}
	if held == nil || held["node"] != g.Node() || held["token"] != hexOf(g.Token()) || held["level"] != "info" {
		t.Errorf("ELECTED_COMPLETE logged as %v; want node %s token %s at info", held, g.Node(), hexOf(g.Token()))
	}
	if n := len(w.types(t)); len(lines) < n || len(lines) > n+1 {
		t.Errorf("%d log lines for %d timeline events (START aside)", len(lines), n)
	}

	c := collect(t, w.reader)
	series := "zkrecipes.outcome=granted,zkrecipes.path=/app/locks/orders,zkrecipes.recipe=lock"
	if p := c.histogram("zkrecipes.acquire.duration")[series]; p.Count != 1 {
		t.Errorf("acquire.duration{%s} count %d, want 1", series, p.Count)
	}
	series = "zkrecipes.outcome=stopped,zkrecipes.path=/app/locks/orders,zkrecipes.recipe=lock"
	if p := c.histogram("zkrecipes.hold.duration")[series]; p.Count != 1 {
		t.Errorf("hold.duration{%s} count %d, want 1", series, p.Count)
	}
}

func TestObserversSeeAWaiterGiveUpAndASessionLoss(t *testing.T) {
	ctx := ctxT(t)
	sim := testkit.NewSim()
	defer sim.Close()
	const path = "/app/locks/jobs"
	holder := newLock(t, sim, path)
	defer holder.Close()
	if _, err := holder.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	conn := sim.Connect()
	l, err := lock.New(conn, path)
	if err != nil {
		t.Fatal(err)
	}
	w := watch(t, l)
	sub := w.Subscribe()
	defer sub.Close()

	// A waiter that gives up: its wait ends "stopped".
	wctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := w.Acquire(wctx)
		res <- err
	}()
	testkit.WaitEvent(t, sub, events.ReadyStart)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v", err)
	}
	testkit.WaitEvent(t, sub, events.StopComplete)

	// Granted once the holder goes, then the session expires under it.
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := w.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sim.Expire(conn)
	select {
	case <-g.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("grant not lost after expiry")
	}
	w.close(t)

	levels := map[string]string{}
	for _, l := range parseLines(t, w.log.Bytes()) {
		levels[l["event"].(string)] = l["level"].(string)
		if l["event"] == "FAILED" && l["err"] == nil {
			t.Error("FAILED logged without its cause")
		}
	}
	for ev, level := range map[string]string{"SUSPENDED": "warn", "LOST": "error", "FAILED": "warn"} {
		if levels[ev] != level {
			t.Errorf("%s logged at %q, want %s", ev, levels[ev], level)
		}
	}

	c := collect(t, w.reader)
	attrs := ",zkrecipes.path=" + path + ",zkrecipes.recipe=lock"
	acquire := c.histogram("zkrecipes.acquire.duration")
	if acquire["zkrecipes.outcome=stopped"+attrs].Count != 1 || acquire["zkrecipes.outcome=granted"+attrs].Count != 1 {
		t.Errorf("acquire.duration: %v, want one stopped and one granted", acquire)
	}
	if p := c.histogram("zkrecipes.hold.duration")["zkrecipes.outcome=failed"+attrs]; p.Count != 1 {
		t.Errorf("hold.duration failed count %d, want 1", p.Count)
	}
	session := c.counter("zkrecipes.session.events")
	if session["zkrecipes.event=SUSPENDED"+attrs] != 1 || session["zkrecipes.event=LOST"+attrs] != 1 {
		t.Errorf("session events %v, want one SUSPENDED and one LOST", session)
	}
	if missed := c.counter("zkrecipes.events.missed"); len(missed) != 0 {
		t.Errorf("missed %v with unbounded subscriptions", missed)
	}
}

func hexOf(v int64) string { return "0x" + strconv.FormatInt(v, 16) }
