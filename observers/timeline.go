package observers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/events"
)

// Timeline writes every event to w as one JSON object per line (JSON
// Lines), in the order the recipe published them, for loading into other
// tools or reading back with ReadTimeline. A line looks like
//
//	{"time":"2026-11-22T19:21:50.123456789Z","recipe":"lock","path":"/app/locks/orders","instance":"worker-1","type":"ELECTED_COMPLETE","state":"LEADER","phase":"granted","term":1,"node":"/app/locks/orders/_c_…-lock-0000000000","token":"0x1c","session":"0x100000000000001","trace_id":"…","span_id":"…"}
//
// with the fields of Record; fields that are not set (phase, term, node,
// token, session, err, trace_id, span_id, missed) are left out. Each line is one
// Write. The first failed Write stops the observer; Err and Close return
// that error.
func Timeline(src Source, w io.Writer) *Observer {
	return start(src, func(ev events.Event) error {
		b, err := json.Marshal(recordOf(ev))
		if err != nil {
			return fmt.Errorf("observers: timeline: %w", err)
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("observers: timeline: %w", err)
		}
		return nil
	})
}

// ReadTimeline reads what Timeline wrote. On a malformed record (a line cut
// short by a crash, say) it returns the records before it and an error
// naming the record's number, from 1.
func ReadTimeline(r io.Reader) ([]Record, error) {
	dec := json.NewDecoder(r)
	var recs []Record
	for {
		var rec Record
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("observers: timeline record %d: %w", len(recs)+1, err)
		}
		recs = append(recs, rec)
	}
}

// Record is one event of a timeline. Its JSON form is Timeline's line:
// time in RFC 3339 with nanoseconds, in UTC; type and state by name; token
// and session in hex ("0x1c"), since session ids do not fit the integers
// of many JSON readers; phase by name ("begin"), left out when none;
// trace_id and span_id in lowercase hex.
type Record struct {
	Time     time.Time
	Recipe   string
	Path     string
	Instance string
	Type     events.Type
	State    events.State
	Phase    events.Phase // what the event meant for its term
	Term     uint64
	Node     string
	Token    int64
	Session  int64
	Err      string // the cause's message
	TraceID  trace.TraceID
	SpanID   trace.SpanID
	Missed   uint64 // OVERFLOW only: how many events the observer missed
}

// RecordOf is ev as a timeline Record.
func RecordOf(ev events.Event) Record { return recordOf(ev) }

func recordOf(ev events.Event) Record {
	r := Record{
		Time: ev.Time, Recipe: ev.Recipe, Path: ev.Path, Instance: ev.Instance, Type: ev.Type, State: ev.State,
		Phase: ev.Phase, Term: ev.Term, Node: ev.Node, Token: ev.Token, Session: ev.SessionID,
		TraceID: ev.TraceID, SpanID: ev.SpanID, Missed: ev.Missed,
	}
	if ev.Err != nil {
		r.Err = ev.Err.Error()
	}
	return r
}

// line is a Record as JSON.
type line struct {
	Time     string `json:"time"`
	Recipe   string `json:"recipe"`
	Path     string `json:"path"`
	Instance string `json:"instance"`
	Type     string `json:"type"`
	State    string `json:"state"`
	Phase    string `json:"phase,omitempty"`
	Term     uint64 `json:"term,omitempty"`
	Node     string `json:"node,omitempty"`
	Token    string `json:"token,omitempty"`
	Session  string `json:"session,omitempty"`
	Err      string `json:"err,omitempty"`
	TraceID  string `json:"trace_id,omitempty"`
	SpanID   string `json:"span_id,omitempty"`
	Missed   uint64 `json:"missed,omitempty"`
}

// MarshalJSON writes r as one timeline line (without the newline).
func (r Record) MarshalJSON() ([]byte, error) {
	l := line{
		Time: r.Time.UTC().Format(time.RFC3339Nano), Recipe: r.Recipe, Path: r.Path, Instance: r.Instance,
		Type: r.Type.String(), State: string(r.State), Term: r.Term, Node: r.Node, Err: r.Err, Missed: r.Missed,
	}
	if r.Phase != events.PhaseNone {
		l.Phase = r.Phase.String()
	}
	if r.Token != 0 {
		l.Token = hex(r.Token)
	}
	if r.Session != 0 {
		l.Session = hex(r.Session)
	}
	if r.TraceID.IsValid() {
		l.TraceID = r.TraceID.String()
	}
	if r.SpanID.IsValid() {
		l.SpanID = r.SpanID.String()
	}
	return json.Marshal(l)
}

// UnmarshalJSON reads one timeline line. An unknown type or phase name is
// an error.
func (r *Record) UnmarshalJSON(b []byte) error {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	out := Record{Recipe: l.Recipe, Path: l.Path, Instance: l.Instance, State: events.State(l.State),
		Term: l.Term, Node: l.Node, Err: l.Err, Missed: l.Missed}
	var errs []error
	var err error
	out.Time, err = time.Parse(time.RFC3339Nano, l.Time)
	errs = append(errs, err)
	t, ok := typeByName[l.Type]
	if !ok {
		errs = append(errs, fmt.Errorf("unknown event type %q", l.Type))
	}
	out.Type = t
	if l.Phase != "" {
		ph, ok := phaseByName[l.Phase]
		if !ok {
			errs = append(errs, fmt.Errorf("unknown phase %q", l.Phase))
		}
		out.Phase = ph
	}
	out.Token, err = parseHex("token", l.Token)
	errs = append(errs, err)
	out.Session, err = parseHex("session", l.Session)
	errs = append(errs, err)
	if l.TraceID != "" {
		out.TraceID, err = trace.TraceIDFromHex(l.TraceID)
		errs = append(errs, err)
	}
	if l.SpanID != "" {
		out.SpanID, err = trace.SpanIDFromHex(l.SpanID)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*r = out
	return nil
}

func parseHex(field, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if !strings.HasPrefix(s, "0x") {
		return 0, fmt.Errorf("%s %q: want 0x and hex digits", field, s)
	}
	v, err := strconv.ParseUint(s[2:], 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", field, s, err)
	}
	return int64(v), nil
}

// phaseByName maps every phase's name back to it.
var phaseByName = func() map[string]events.Phase {
	m := make(map[string]events.Phase)
	for p := events.PhaseNone; !strings.HasPrefix(p.String(), "Phase("); p++ {
		m[p.String()] = p
	}
	return m
}()

// typeByName maps every event type's name back to it.
var typeByName = func() map[string]events.Type {
	m := make(map[string]events.Type)
	for t := events.Type(1); !strings.HasPrefix(t.String(), "Type("); t++ {
		m[t.String()] = t
	}
	return m
}()
