package observers

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
)

// WriteChromeTrace writes a timeline's records (ReadTimeline's, or
// RecordOf's) as Chrome's Trace Event JSON, which Perfetto
// (ui.perfetto.dev) and speedscope open with no backend: one process per
// recipe and path, one thread (a lane) per instance; on each lane the
// machine's states as complete events, each from the event that entered
// it to the next one, and every lifecycle event as an instant event with
// its fields as args. Times are microseconds since the first record.
func WriteChromeTrace(w io.Writer, recs []Record) error {
	recs = append([]Record(nil), recs...)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Time.Before(recs[j].Time) })
	type lane struct{ pid, tid int }
	var (
		out      []traceEvent
		procs    = map[string]int{}
		lanes    = map[string]lane{}
		open     = map[string]int{} // lane → index in out of its state in progress
		start, e time.Time
	)
	if len(recs) > 0 {
		start, e = recs[0].Time, recs[len(recs)-1].Time
	}
	us := func(t time.Time) float64 { return float64(t.Sub(start).Nanoseconds()) / 1e3 }
	for _, r := range recs {
		proc := r.Recipe + " " + r.Path
		pid, ok := procs[proc]
		if !ok {
			pid = len(procs) + 1
			procs[proc] = pid
			out = append(out, traceEvent{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": proc}})
		}
		key := proc + "\x00" + r.Instance
		l, ok := lanes[key]
		if !ok {
			l = lane{pid, len(lanes) + 1}
			lanes[key] = l
			out = append(out, traceEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: l.tid, Args: map[string]any{"name": r.Instance}})
		}
		at := us(r.Time)
		if i, ok := open[key]; ok {
			d := at - out[i].Ts
			out[i].Dur = &d
		}
		out = append(out, traceEvent{Name: string(r.State), Cat: "state", Ph: "X", Ts: at, Pid: l.pid, Tid: l.tid})
		open[key] = len(out) - 1
		out = append(out, traceEvent{Name: r.Type.String(), Cat: "event", Ph: "i", S: "t", Ts: at, Pid: l.pid, Tid: l.tid, Args: eventArgs(r)})
	}
	for _, i := range open { // states still in progress end with the last record
		d := us(e) - out[i].Ts
		out[i].Dur = &d
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
