package observers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/events"
)

// TraceFile collects what recipes did — their OpenTelemetry spans and
// their lifecycle events — to look at with no tracing backend: WriteHTML
// writes a timeline that opens offline in any browser, WriteChromeTrace
// the same as Chrome Trace Event JSON (Perfetto, speedscope). With
// WithRecording it also writes everything to a file as it comes, one JSON
// object per line, which ReadRecording (and `zkr trace FILE -html OUT`)
// reads back.
//
// It is an sdktrace.SpanExporter for the spans and a subscriber for the
// events:
//
//	tf := observers.NewTraceFile()
//	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tf)) // WithBatcher(tf) in a service
//	l, _ := lock.New(conn, "/app/locks/orders", lock.WithTracerProvider(tp))
//	obs := tf.Observe(l)
//	... use l ...
//	l.Close(); <-obs.Done(); tp.Shutdown(ctx)
//	tf.WriteHTML(file)
//
// WithSyncer exports each span on the goroutine that ends it, which may be
// a recipe's actor: keep it for in-memory collection (tests, the demo);
// with WithRecording in a service, use WithBatcher, so that no recipe
// waits for the file. A TraceFile is safe for concurrent use.
type TraceFile struct {
	mu      sync.Mutex
	rec     io.Writer // WithRecording; nil when none
	keep    int
	spans   []Span
	recs    []Record
	notes   []Note
	dropped uint64 // spans, records and notes not kept beyond keep
	err     error  // the first failed write to rec
}

// TraceFileOption configures NewTraceFile.
type TraceFileOption func(*TraceFile)

// WithRecording writes every span, event and note to w as it arrives, one
// JSON object per line (see ReadRecording), each line one Write. The
// first failed Write stops the recording; Err returns its error. Default:
// no recording.
func WithRecording(w io.Writer) TraceFileOption { return func(f *TraceFile) { f.rec = w } }

// WithKeep sets how many spans, events and notes (together) the TraceFile
// keeps in memory for WriteHTML and WriteChromeTrace; later ones are only
// recorded (WithRecording) and counted as dropped. 0 keeps none, for a
// TraceFile that only records. Default: 1,000,000.
func WithKeep(n int) TraceFileOption { return func(f *TraceFile) { f.keep = max(n, 0) } }

// NewTraceFile returns an empty TraceFile.
func NewTraceFile(opts ...TraceFileOption) *TraceFile {
	f := &TraceFile{keep: 1_000_000}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Span is one finished OpenTelemetry span.
type Span struct {
	Name       string
	Scope      string // the instrumentation scope: the tracer's name
	Kind       trace.SpanKind
	TraceID    trace.TraceID
	SpanID     trace.SpanID
	Parent     trace.SpanID // zero for a root span
	Start, End time.Time
	Status     codes.Code
	StatusMsg  string
	Attrs      []attribute.KeyValue
	Events     []SpanEvent
	Links      []trace.SpanContext
}

// SpanEvent is an event recorded on a span (a session change, a grant).
type SpanEvent struct {
	Name  string
	Time  time.Time
	Attrs []attribute.KeyValue
}

// Note is a remark at a moment that no event or span records, such as a
// process crashing. Instance names the lane it belongs to; empty, it is
// marked across the whole timeline.
type Note struct {
	Time     time.Time
	Instance string
	Text     string
}

// SpanOf is s as a Span.
func SpanOf(s sdktrace.ReadOnlySpan) Span {
	out := Span{
		Name: s.Name(), Scope: s.InstrumentationScope().Name, Kind: s.SpanKind(),
		TraceID: s.SpanContext().TraceID(), SpanID: s.SpanContext().SpanID(),
		Start: s.StartTime(), End: s.EndTime(), Status: s.Status().Code, StatusMsg: s.Status().Description,
		Attrs: slices.Clone(s.Attributes()),
	}
	sortAttrs(out.Attrs)
	if p := s.Parent(); p.IsValid() {
		out.Parent = p.SpanID()
	}
	for _, e := range s.Events() {
		ev := SpanEvent{Name: e.Name, Time: e.Time, Attrs: slices.Clone(e.Attributes)}
		sortAttrs(ev.Attrs)
		out.Events = append(out.Events, ev)
	}
	for _, l := range s.Links() {
		out.Links = append(out.Links, l.SpanContext)
	}
	return out
}

// ExportSpans adds spans (sdktrace.SpanExporter). It returns the
// recording's error, if any.
func (f *TraceFile) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		f.AddSpan(SpanOf(s))
	}
	return f.Err()
}

// Shutdown does nothing: the TraceFile stays readable
// (sdktrace.SpanExporter).
func (f *TraceFile) Shutdown(context.Context) error { return nil }

// Observe adds every event src publishes from now on, on an observer of
// its own (see Observer). Instances with no id of their own are named by
// their node's uuid, as in their events.
func (f *TraceFile) Observe(src Source) *Observer {
	return start(src, func(ev events.Event) error {
		f.AddEvent(ev)
		return nil
	})
}

// AddSpan adds one span.
func (f *TraceFile) AddSpan(s Span) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(spanLine(s))
	if f.room() {
		f.spans = append(f.spans, s)
	}
}

// AddEvent adds one lifecycle event.
func (f *TraceFile) AddEvent(ev events.Event) {
	r := RecordOf(ev)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(r)
	if f.room() {
		f.recs = append(f.recs, r)
	}
}

// AddNote adds a note: a crash, say, that no event records.
func (f *TraceFile) AddNote(n Note) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(noteLine{Note: n.Text, Time: n.Time.UTC().Format(time.RFC3339Nano), Instance: n.Instance})
	if f.room() {
		f.notes = append(f.notes, n)
	}
}

// room says whether one more item may be kept, counting it as dropped if
// not. f.mu is held.
func (f *TraceFile) room() bool {
	if len(f.spans)+len(f.recs)+len(f.notes) < f.keep {
		return true
	}
	f.dropped++
	return false
}

// record writes v as one line of the recording. f.mu is held.
func (f *TraceFile) record(v any) {
	if f.rec == nil || f.err != nil {
		return
	}
	b, err := marshalLine(v)
	if err == nil {
		_, err = f.rec.Write(b)
	}
	if err != nil {
		f.err = fmt.Errorf("observers: trace file recording: %w", err)
	}
}

// Err is the error that stopped the recording, or nil.
func (f *TraceFile) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Spans returns a copy of the spans kept, in the order they ended.
func (f *TraceFile) Spans() []Span {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.spans)
}

// Records returns a copy of the events kept, in the order they arrived.
func (f *TraceFile) Records() []Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.recs)
}

// Dropped is how many spans, events and notes were not kept (WithKeep).
func (f *TraceFile) Dropped() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// snapshot is what the writers draw.
func (f *TraceFile) snapshot() *timeline {
	f.mu.Lock()
	defer f.mu.Unlock()
	return buildTimeline(f.recs, f.spans, f.notes, f.dropped)
}

// WriteChromeTrace writes what f holds as Chrome's Trace Event JSON, which
// Perfetto (ui.perfetto.dev) and speedscope open with no backend: one
// process per recipe and path, one thread (a lane) per instance with its
// states as complete events and its lifecycle events as instants; below
// it, threads holding the instance's spans as complete events, nested
// (a span's ZooKeeper requests under it), with attributes, status and
// span events as args. Spans tied to no instance (see WriteHTML) are in a
// process of their own. Times are microseconds since the first item.
func (f *TraceFile) WriteChromeTrace(w io.Writer) error {
	return f.snapshot().writeChrome(w)
}

// WriteHTML writes what f holds as one self-contained HTML page (inline
// CSS and script, nothing fetched): a lane per recipe instance, grouped by
// recipe and path; on each lane its machine's states as coloured bars over
// time, its spans below as nested bars (ZooKeeper requests under the call
// that made them, errors in red), faults (SUSPENDED, LOST, FAILED, notes
// such as a crash) marked; hovering over anything shows its attributes.
//
// A span belongs to the lane of the instance whose events carry its span
// id (the call that began a term), or else whose session and path its
// attributes name; a span with neither takes its parent's lane, or its
// children's. Spans tied to no instance get a lane per trace root name.
func (f *TraceFile) WriteHTML(w io.Writer) error {
	return f.snapshot().writeHTML(w)
}

// errRecording wraps errors reading a recording.
var errRecording = errors.New("observers: recording")
