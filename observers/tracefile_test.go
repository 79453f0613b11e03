package observers_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/observers"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// traced runs two lock workers on the simulator with a TraceFile on their
// spans and events: a takes the lock and its session expires while it
// holds it; b waits, then takes and releases it.
func traced(t *testing.T, opts ...observers.TraceFileOption) *observers.TraceFile {
	t.Helper()
	ctx := ctxT(t)
	tf := observers.NewTraceFile(opts...)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tf))
	sim := testkit.NewSim()
	defer sim.Close()
	ca, cb := sim.Connect(), sim.Connect()
	a, err := lock.New(ca, "/app/lock", lock.WithID("a"), lock.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	b, err := lock.New(cb, "/app/lock", lock.WithID("b"), lock.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	oa, ob := tf.Observe(a), tf.Observe(b)
	subB := b.Subscribe()
	defer subB.Close()
	g, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx)
		got <- err
	}()
	waitEvent(t, subB, events.ReadyStart) // b waits on a's node
	tf.AddNote(observers.Note{Time: time.Now(), Instance: "a", Text: "a crashes"})
	sim.Expire(ca)
	<-g.Lost()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	waitDone(t, oa)
	waitDone(t, ob)
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return tf
}

func waitEvent(t *testing.T, sub *events.Subscription, typ events.Type) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-sub.C:
			if ev.Type == typ {
				return
			}
		case <-deadline:
			t.Fatalf("no %s", typ)
		}
	}
}

// The Chrome trace holds each worker's lane with its states, and its
// spans (the acquire and its ZooKeeper requests) on the threads below it.
func TestTraceFileChromeTraceHasSpans(t *testing.T) {
	tf := traced(t)
	var buf bytes.Buffer
	if err := tf.WriteChromeTrace(&buf); err != nil {
		t.Fatal(err)
	}
	var ct struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Ph   string         `json:"ph"`
			Ts   float64        `json:"ts"`
			Dur  *float64       `json:"dur"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &ct); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	threads := map[int]string{}
	spansOf := map[string][]string{} // lane → its span names, over its tracks
	var states, lost, notes int
	for _, e := range ct.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			threads[e.Tid] = e.Args["name"].(string)
		}
	}
	for _, e := range ct.TraceEvents {
		switch {
		case e.Cat == "span":
			if e.Ph != "X" || e.Dur == nil || e.Args["span_id"] == nil || e.Args["trace_id"] == nil {
				t.Errorf("span event %+v", e)
			}
			name := e.Name
			if e.Args["span.kind"] == "client" {
				name = "request " + name
			}
			// A lane whose spans overlap without nesting has several
			// tracks: "b spans 1", "b spans 2".
			who, _, _ := strings.Cut(threads[e.Tid], " spans")
			spansOf[who] = append(spansOf[who], name)
		case e.Cat == "state":
			states++
		case e.Name == "LOST":
			lost++
		case e.Cat == "note" && e.Name == "a crashes":
			notes++
		}
	}
	for _, who := range []string{"a", "b"} {
		names := spansOf[who]
		if !slices.Contains(names, "lock.acquire /app/lock") || !slices.Contains(names, "request create /app/lock") {
			t.Errorf("%s's spans: %v; want lock.acquire and its requests (threads %v)", who, names, threads)
		}
	}
	if states == 0 || lost != 1 || notes != 1 {
		t.Errorf("%d states, %d LOST, %d notes; want some, 1, 1", states, lost, notes)
	}
}

// The HTML page has one lane per worker, with state bars, span bars and
// the fault marked, and loads nothing from elsewhere.
func TestTraceFileHTML(t *testing.T) {
	tf := traced(t)
	var buf bytes.Buffer
	if err := tf.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	lanes := regexp.MustCompile(`<div class="lane" data-lane="([^"]*)"`).FindAllStringSubmatch(page, -1)
	var names []string
	for _, m := range lanes {
		names = append(names, m[1])
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("lanes %v, want [a b]", names)
	}
	for _, want := range []string{`<h2>lock /app/lock</h2>`, `class="sp"`, `class="sp client"`, `<span>lock.acquire /app/lock</span>`,
		`class="mark fault"`, `>LOST</span>`, `>a crashes</span>`, `>LEADER</span>`, "zookeeper.session.id = "} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, bad := range []string{"http://", "https://", "<link", " src="} {
		if strings.Contains(page, bad) {
			t.Errorf("page has %q: it must open offline", bad)
		}
	}
}

// A recording read back draws the same page as the TraceFile that wrote
// it.
func TestTraceFileRecordingRoundTrip(t *testing.T) {
	var rec bytes.Buffer
	tf := traced(t, observers.WithRecording(&rec))
	if err := tf.Err(); err != nil {
		t.Fatal(err)
	}
	back, err := observers.ReadRecording(bytes.NewReader(rec.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(back.Spans()), len(tf.Spans()); got != want || want == 0 {
		t.Errorf("%d spans read back, %d written", got, want)
	}
	if got, want := len(back.Records()), len(tf.Records()); got != want || want == 0 {
		t.Errorf("%d events read back, %d written", got, want)
	}
	var p1, p2 bytes.Buffer
	if err := tf.WriteHTML(&p1); err != nil {
		t.Fatal(err)
	}
	if err := back.WriteHTML(&p2); err != nil {
		t.Fatal(err)
	}
	if p1.String() != p2.String() {
		t.Errorf("the page from the recording differs from the original")
	}

	// A line cut short: what came before it, and its number.
	cut := rec.Bytes()[:bytes.LastIndexByte(rec.Bytes()[:rec.Len()-1], '\n')+5]
	part, err := observers.ReadRecording(bytes.NewReader(cut))
	n := bytes.Count(cut, []byte("\n"))
	if err == nil || !strings.Contains(err.Error(), "line "+strconv.Itoa(n+1)) {
		t.Errorf("cut recording: err %v, want one naming line %d", err, n+1)
	}
	if got := len(part.Spans()) + len(part.Records()); got != n-1 { // n lines, one a note
		t.Errorf("%d items before the cut, want %d", got, n-1)
	}
}

// Spans found by session and path, and by their parent; a span of no
// instance gets a lane of its own; attributes of every type survive the
// recording.
func TestTraceFileLanesOfSpans(t *testing.T) {
	tid := trace.TraceID{1}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var rec bytes.Buffer
	tf := observers.NewTraceFile(observers.WithRecording(&rec))
	for _, ev := range []events.Event{
		{Time: at(0), Recipe: "lock", Path: "/l", Instance: "w1", Type: events.OfferStart, State: events.StateOffer, SessionID: 0x10},
		{Time: at(0), Recipe: "lock", Path: "/m", Instance: "w2", Type: events.OfferStart, State: events.StateOffer, SessionID: 0x10},
		{Time: at(9), Recipe: "lock", Path: "/l", Instance: "w1", Type: events.Suspended, State: events.StateOffer, SessionID: 0x10},
	} {
		tf.AddEvent(ev)
	}
	attrs := []attribute.KeyValue{attribute.Int64("zk.session_id", 0x10), attribute.Bool("b", true),
		attribute.Float64("f", 1.5), attribute.StringSlice("ss", []string{"x", "y"}), attribute.Int64Slice("is", []int64{1, 1 << 62})}
	tf.AddSpan(observers.Span{Name: "release", TraceID: tid, SpanID: trace.SpanID{1}, Start: at(1), End: at(5), Kind: trace.SpanKindInternal})
	tf.AddSpan(observers.Span{Name: "zk.delete /l", TraceID: tid, SpanID: trace.SpanID{2}, Parent: trace.SpanID{1}, Start: at(2), End: at(3),
		Kind: trace.SpanKindClient, Status: codes.Error, StatusMsg: "boom", Attrs: attrs})
	tf.AddSpan(observers.Span{Name: "cron tick", TraceID: trace.TraceID{2}, SpanID: trace.SpanID{3}, Start: at(4), End: at(6)})
	var page bytes.Buffer
	if err := tf.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-lane="w1"`, `data-lane="w2"`, `data-lane="cron"`, `<h2>spans of no recipe instance</h2>`, `class="sp client err"`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	w1 := page.String()[strings.Index(page.String(), `data-lane="w1"`):strings.Index(page.String(), `data-lane="w2"`)]
	if !strings.Contains(w1, "<span>release</span>") || !strings.Contains(w1, "<span>zk.delete /l</span>") {
		t.Errorf("w1's lane lacks its spans:\n%s", w1)
	}
	back, err := observers.ReadRecording(&rec)
	if err != nil {
		t.Fatal(err)
	}
	got := back.Spans()[1].Attrs
	want := slices.Clone(attrs)
	slices.SortFunc(want, func(a, b attribute.KeyValue) int { return strings.Compare(string(a.Key), string(b.Key)) })
	if len(got) != len(want) {
		t.Fatalf("attrs %v, want %v", got, want)
	}
	for i := range got {
		if got[i].Key != want[i].Key || got[i].Value.String() != want[i].Value.String() || got[i].Value.Type() != want[i].Value.Type() {
			t.Errorf("attr %d: %v (%v), want %v (%v)", i, got[i], got[i].Value.Type(), want[i], want[i].Value.Type())
		}
	}
}
