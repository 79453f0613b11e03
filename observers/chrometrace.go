package observers

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/codes"
)

// WriteChromeTrace writes a timeline's records (ReadTimeline's, or
// RecordOf's) as Chrome's Trace Event JSON, which Perfetto
// (ui.perfetto.dev) and speedscope open with no backend: one process per
// recipe and path, one thread (a lane) per instance; on each lane the
// machine's states as complete events, each from the event that entered
// it to the next one, and every lifecycle event as an instant event with
// its fields as args. Times are microseconds since the first record.
// TraceFile.WriteChromeTrace writes spans as well.
func WriteChromeTrace(w io.Writer, recs []Record) error {
	return buildTimeline(recs, nil, nil, 0).writeChrome(w)
}

func (tl *timeline) writeChrome(w io.Writer) error {
	us := func(t time.Time) float64 { return float64(t.Sub(tl.start).Nanoseconds()) / 1e3 }
	var out []traceEvent
	meta := func(name string, pid, tid int, v any) {
		out = append(out, traceEvent{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": v}})
	}
	nextTid := 1
	for _, g := range tl.groups {
		nextTid += len(g.lanes)
	}
	for gi, g := range tl.groups {
		pid := gi + 1
		meta("process_name", pid, 0, g.name)
		for _, l := range g.lanes {
			meta("thread_name", pid, l.id, l.name)
			out = append(out, traceEvent{Name: "thread_sort_index", Ph: "M", Pid: pid, Tid: l.id, Args: map[string]any{"sort_index": l.id * 1000}})
			for _, s := range l.states {
				d := us(s.to) - us(s.from)
				out = append(out, traceEvent{Name: string(s.state), Cat: "state", Ph: "X", Ts: us(s.from), Dur: &d, Pid: pid, Tid: l.id})
			}
			for _, r := range l.recs {
				out = append(out, traceEvent{Name: r.Type.String(), Cat: "event", Ph: "i", S: "t", Ts: us(r.Time), Pid: pid, Tid: l.id, Args: eventArgs(r)})
			}
			for _, n := range l.notes {
				out = append(out, traceEvent{Name: n.Text, Cat: "note", Ph: "i", S: "t", Ts: us(n.Time), Pid: pid, Tid: l.id})
			}
			for t, track := range l.tracks {
				tid := nextTid
				nextTid++
				name := l.name + " spans"
				if len(l.tracks) > 1 {
					name += fmt.Sprintf(" %d", t+1)
				}
				meta("thread_name", pid, tid, name)
				out = append(out, traceEvent{Name: "thread_sort_index", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"sort_index": l.id*1000 + t + 1}})
				for _, s := range track {
					d := us(s.End) - us(s.Start)
					out = append(out, traceEvent{Name: s.Name, Cat: "span", Ph: "X", Ts: us(s.Start), Dur: &d, Pid: pid, Tid: tid, Args: spanArgs(s.Span)})
					for _, e := range s.Events {
						out = append(out, traceEvent{Name: e.Name, Cat: "span_event", Ph: "i", S: "t", Ts: us(e.Time), Pid: pid, Tid: tid, Args: attrMap(e.Attrs)})
					}
				}
			}
		}
	}
	for _, n := range tl.notes {
		out = append(out, traceEvent{Name: n.Text, Cat: "note", Ph: "i", S: "g", Ts: us(n.Time), Pid: 1})
	}
	b, err := json.Marshal(struct {
		TraceEvents     []traceEvent `json:"traceEvents"`
		DisplayTimeUnit string       `json:"displayTimeUnit"`
	}{out, "ms"})
	if err != nil {
		return fmt.Errorf("observers: chrome trace: %w", err)
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("observers: chrome trace: %w", err)
	}
	return nil
}

// spanArgs are a span's attributes, ids, kind and status as args.
func spanArgs(s *Span) map[string]any {
	a := attrMap(s.Attrs)
	if a == nil {
		a = map[string]any{}
	}
	a["trace_id"], a["span_id"] = s.TraceID.String(), s.SpanID.String()
	if s.Parent.IsValid() {
		a["parent_id"] = s.Parent.String()
	}
	a["span.kind"] = s.Kind.String()
	if s.Status == codes.Error {
		a["status"] = "error"
		if s.StatusMsg != "" {
			a["status_message"] = s.StatusMsg
		}
	}
	return a
}

// traceEvent is one event of the Trace Event Format.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	S    string         `json:"s,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

func eventArgs(r Record) map[string]any {
	a := map[string]any{"state": string(r.State)}
	if r.Node != "" {
		a["node"] = r.Node
	}
	if r.Term != 0 {
		a["term"] = r.Term
	}
	if r.Token != 0 {
		a["token"] = hex(r.Token)
	}
	if r.Session != 0 {
		a["session"] = hex(r.Session)
	}
	if r.Err != "" {
		a["err"] = r.Err
	}
	if r.TraceID.IsValid() {
		a["trace_id"] = r.TraceID.String()
	}
	return a
}
