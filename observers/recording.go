package observers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// A recording (WithRecording) is JSON Lines of three kinds:
//
//	{"time":"…","recipe":"lock","path":"/app/lock","instance":"w1","type":"ELECTED_COMPLETE",…}   an event: Timeline's line
//	{"span":"create /app/lock","scope":"…","kind":"client","trace_id":"…","span_id":"…","parent_id":"…","start":"…","end":"…","status":"error","status_message":"…","attrs":{"zookeeper.node":"/app/lock/…"},"events":[{"name":"SUSPENDED","time":"…","attrs":{…}}],"links":[{"trace_id":"…","span_id":"…"}]}
//	{"note":"worker-3 crashes","time":"…","instance":"worker-3"}
//
// Times are RFC 3339 with nanoseconds, in UTC; ids in lowercase hex; empty
// fields are left out. A file Timeline wrote is a recording with events
// only.

type spanJSON struct {
	Span      string          `json:"span"`
	Scope     string          `json:"scope,omitempty"`
	Kind      string          `json:"kind,omitempty"`
	TraceID   string          `json:"trace_id"`
	SpanID    string          `json:"span_id"`
	Parent    string          `json:"parent_id,omitempty"`
	Start     string          `json:"start"`
	End       string          `json:"end"`
	Status    string          `json:"status,omitempty"`
	StatusMsg string          `json:"status_message,omitempty"`
	Attrs     map[string]any  `json:"attrs,omitempty"`
	Events    []spanEventJSON `json:"events,omitempty"`
	Links     []linkJSON      `json:"links,omitempty"`
}

type spanEventJSON struct {
	Name  string         `json:"name"`
	Time  string         `json:"time"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

type linkJSON struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

type noteLine struct {
	Note     string `json:"note"`
	Time     string `json:"time"`
	Instance string `json:"instance,omitempty"`
}

func marshalLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func attrMap(kvs []attribute.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func spanLine(s Span) spanJSON {
	l := spanJSON{Span: s.Name, Scope: s.Scope, TraceID: s.TraceID.String(), SpanID: s.SpanID.String(),
		Start: rfc(s.Start), End: rfc(s.End), StatusMsg: s.StatusMsg, Attrs: attrMap(s.Attrs)}
	if s.Kind != trace.SpanKindUnspecified {
		l.Kind = s.Kind.String()
	}
	if s.Parent.IsValid() {
		l.Parent = s.Parent.String()
	}
	switch s.Status {
	case codes.Error:
		l.Status = "error"
	case codes.Ok:
		l.Status = "ok"
	}
	for _, e := range s.Events {
		l.Events = append(l.Events, spanEventJSON{Name: e.Name, Time: rfc(e.Time), Attrs: attrMap(e.Attrs)})
	}
	for _, sc := range s.Links {
		l.Links = append(l.Links, linkJSON{sc.TraceID().String(), sc.SpanID().String()})
	}
	return l
}

var kindByName = map[string]trace.SpanKind{
	"internal": trace.SpanKindInternal, "server": trace.SpanKindServer, "client": trace.SpanKindClient,
	"producer": trace.SpanKindProducer, "consumer": trace.SpanKindConsumer,
}

// ReadRecording reads a recording (WithRecording's, or Timeline's) into
// a TraceFile, to write it as HTML or Chrome Trace JSON. On a malformed
// line (one cut short by a crash, say) it returns what came before it and
// an error naming the line, from 1.
func ReadRecording(r io.Reader) (*TraceFile, error) {
	f := NewTraceFile()
	dec := json.NewDecoder(r)
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err == nil {
			err = f.addLine(raw)
		}
		if err != nil {
			return f, fmt.Errorf("%w: line %d: %w", errRecording, n, err)
		}
	}
}

func (f *TraceFile) addLine(raw []byte) error {
	var probe struct {
		Span *string `json:"span"`
		Note *string `json:"note"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return err
	}
	switch {
	case probe.Span != nil:
		s, err := parseSpan(raw)
		if err != nil {
			return err
		}
		f.spans = append(f.spans, s)
	case probe.Note != nil:
		var l noteLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339Nano, l.Time)
		if err != nil {
			return err
		}
		f.notes = append(f.notes, Note{Time: t, Instance: l.Instance, Text: l.Note})
	default:
		var rec Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return err
		}
		f.recs = append(f.recs, rec)
	}
	return nil
}

func parseSpan(raw []byte) (Span, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // session ids and tokens do not fit a float64
	var l spanJSON
	if err := dec.Decode(&l); err != nil {
		return Span{}, err
	}
	s := Span{Name: l.Span, Scope: l.Scope, Kind: kindByName[l.Kind], StatusMsg: l.StatusMsg, Attrs: attrsOf(l.Attrs)}
	var errs []error
	var err error
	s.TraceID, err = trace.TraceIDFromHex(l.TraceID)
	errs = append(errs, err)
	s.SpanID, err = trace.SpanIDFromHex(l.SpanID)
	errs = append(errs, err)
	if l.Parent != "" {
		s.Parent, err = trace.SpanIDFromHex(l.Parent)
		errs = append(errs, err)
	}
	s.Start, err = time.Parse(time.RFC3339Nano, l.Start)
	errs = append(errs, err)
	s.End, err = time.Parse(time.RFC3339Nano, l.End)
	errs = append(errs, err)
	switch l.Status {
	case "error":
		s.Status = codes.Error
	case "ok":
		s.Status = codes.Ok
	}
	for _, e := range l.Events {
		t, err := time.Parse(time.RFC3339Nano, e.Time)
		errs = append(errs, err)
		s.Events = append(s.Events, SpanEvent{Name: e.Name, Time: t, Attrs: attrsOf(e.Attrs)})
	}
	for _, k := range l.Links {
		tid, err1 := trace.TraceIDFromHex(k.TraceID)
		sid, err2 := trace.SpanIDFromHex(k.SpanID)
		errs = append(errs, err1, err2)
		s.Links = append(s.Links, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	}
	return s, errors.Join(errs...)
}

// attrsOf turns JSON attribute values back into typed attributes: strings,
// booleans, integers (json.Number without a fraction), floats, and arrays
// of one of them.
func attrsOf(m map[string]any) []attribute.KeyValue {
	var out []attribute.KeyValue
	for k, v := range m {
		out = append(out, attribute.KeyValue{Key: attribute.Key(k), Value: valueOf(v)})
	}
	sortAttrs(out)
	return out
}

func valueOf(v any) attribute.Value {
	switch v := v.(type) {
	case string:
		return attribute.StringValue(v)
	case bool:
		return attribute.BoolValue(v)
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return attribute.Int64Value(i)
		}
		f, _ := v.Float64()
		return attribute.Float64Value(f)
	case []any:
		var (
			ss []string
			bs []bool
			is []int64
			fs []float64
		)
		for _, e := range v {
			switch ev := valueOf(e); ev.Type() {
			case attribute.STRING:
				ss = append(ss, ev.AsString())
			case attribute.BOOL:
				bs = append(bs, ev.AsBool())
			case attribute.INT64:
				is = append(is, ev.AsInt64())
				fs = append(fs, float64(ev.AsInt64()))
			case attribute.FLOAT64:
				fs = append(fs, ev.AsFloat64())
			}
		}
		switch {
		case len(ss) == len(v):
			return attribute.StringSliceValue(ss)
		case len(bs) == len(v):
			return attribute.BoolSliceValue(bs)
		case len(is) == len(v):
			return attribute.Int64SliceValue(is)
		case len(fs) == len(v):
			return attribute.Float64SliceValue(fs)
		}
	}
	return attribute.StringValue(fmt.Sprint(v))
}
