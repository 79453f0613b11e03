// Package oteltest records the spans and metrics a recipe makes and checks
// them against the project's OpenTelemetry conventions, for the recipes'
// tests.
package oteltest

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Rec is a tracer provider and a meter provider that keep what they get.
type Rec struct {
	TP     *sdktrace.TracerProvider
	MP     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

// New returns a Rec, shut down at t's cleanup.
func New(t testing.TB) *Rec {
	r := &Rec{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.TP = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	r.MP = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = r.TP.Shutdown(context.Background())
		_ = r.MP.Shutdown(context.Background())
	})
	return r
}

// Ended are the spans ended so far, in the order they ended.
func (r *Rec) Ended() []sdktrace.ReadOnlySpan { return r.spans.Ended() }

// Named are the ended spans named name.
func (r *Rec) Named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Only is the one ended span named name; the test fails otherwise.
func (r *Rec) Only(t testing.TB, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := r.Named(name)
	if len(got) != 1 {
		t.Fatalf("want one span %q, got %d; spans: %s", name, len(got), r.Names())
	}
	return got[0]
}

// Names lists the ended spans' names, for failure messages.
func (r *Rec) Names() string {
	var b strings.Builder
	for _, s := range r.spans.Ended() {
		b.WriteString("\n  " + s.SpanKind().String() + " " + s.Name())
		if s.Status().Code == codes.Error {
			b.WriteString(" [error " + Attr(s, "error.type") + "]")
		}
	}
	return b.String()
}

// Children are the ended spans whose parent is p.
func (r *Rec) Children(p sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Parent().SpanID() == p.SpanContext().SpanID() {
			out = append(out, s)
		}
	}
	return out
}

// Attr is the value of span s's attribute key, as a string ("" if unset).
func Attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.String()
		}
	}
	return ""
}

// HasEvent reports whether s has an event named name.
func HasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

// WantAttrs fails the test unless s has every attribute of want.
func WantAttrs(t testing.TB, s sdktrace.ReadOnlySpan, want ...attribute.KeyValue) {
	t.Helper()
	for _, w := range want {
		if got := Attr(s, string(w.Key)); got != w.Value.String() {
			t.Errorf("span %q: %s = %q, want %q", s.Name(), w.Key, got, w.Value.String())
		}
	}
}

var (
	sequenced = regexp.MustCompile(`_c_|qn-|\d{10}`) // a contender's, an item's or a sequence number
	hexID     = regexp.MustCompile(`^0x[0-9a-f]+$`)
)

// CheckConventions checks every ended span against the conventions:
//   - a name is "<operation> <dir>": no node's name, no sequence number;
//   - no status Ok; an Error status comes with error.type;
//   - db.system.name is zookeeper;
//   - a CLIENT span (a request) has db.operation.name, a name starting with
//     it, and a hex zookeeper.session.id;
//   - no span starts after its parent (among the ended) has ended; a root
//     request span is linked to the operation it was made for.
func (r *Rec) CheckConventions(t testing.TB) {
	t.Helper()
	ended := r.spans.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byID[s.SpanContext().SpanID()] = s
	}
	for _, s := range ended {
		if s.Name() == "request" { // the test's own span
			continue
		}
		if sequenced.MatchString(s.Name()) {
			t.Errorf("span %q is named after a node", s.Name())
		}
		if strings.Count(s.Name(), " ") != 1 {
			t.Errorf("span %q is not named \"<operation> <dir>\"", s.Name())
		}
		switch s.Status().Code {
		case codes.Ok:
			t.Errorf("span %q has status Ok", s.Name())
		case codes.Error:
			if Attr(s, "error.type") == "" {
				t.Errorf("span %q has status Error and no error.type", s.Name())
			}
		}
		if Attr(s, "db.system.name") != "zookeeper" {
			t.Errorf("span %q: db.system.name = %q", s.Name(), Attr(s, "db.system.name"))
		}
		if s.SpanKind() == trace.SpanKindClient {
			op := Attr(s, "db.operation.name")
			if op == "" || !strings.HasPrefix(s.Name(), op+" ") {
				t.Errorf("request span %q: db.operation.name %q", s.Name(), op)
			}
			if id := Attr(s, "zookeeper.session.id"); !hexID.MatchString(id) {
				t.Errorf("request span %q: zookeeper.session.id %q is not hex", s.Name(), id)
			}
		}
		if p, ok := byID[s.Parent().SpanID()]; ok && s.StartTime().After(p.EndTime()) {
			t.Errorf("span %q starts after its parent %q ended", s.Name(), p.Name())
		}
		if !s.Parent().IsValid() && s.SpanKind() == trace.SpanKindClient && len(s.Links()) == 0 {
			// A request with no operation at all (a session's own
			// clean-up) may be a plain root; one made for an operation is
			// linked to it, which the tests check where they make one.
			continue
		}
	}
}

// Metrics collects the metrics recorded so far.
func (r *Rec) Metrics(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// Metric is the instrument named name of scope, as collected; the test
// fails when there is none.
func (r *Rec) Metric(t testing.TB, scope, name string) metricdata.Metrics {
	t.Helper()
	rm := r.Metrics(t)
	var seen []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sm.Scope.Name == scope && m.Name == name {
				return m
			}
			seen = append(seen, sm.Scope.Name+" "+m.Name)
		}
	}
	t.Fatalf("no metric %s in scope %s; have %v", name, scope, seen)
	return metricdata.Metrics{}
}
