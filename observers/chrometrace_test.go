package observers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/observers"
)

// A trace of two lock workers: Perfetto's JSON, one lane per worker, its
// states as complete events that tile the lane, its events as instants.
func TestWriteChromeTrace(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var recs []observers.Record
	for _, ev := range []events.Event{
		{Time: at(0), Recipe: "lock", Path: "/l", Instance: "w1", Type: events.Start, State: events.StateStart},
		{Time: at(0), Recipe: "lock", Path: "/l", Instance: "w2", Type: events.Start, State: events.StateStart},
		{Time: at(1), Recipe: "lock", Path: "/l", Instance: "w1", Type: events.ElectedComplete, State: events.StateLeader, Term: 1, Token: 0x1c},
		{Time: at(2), Recipe: "lock", Path: "/l", Instance: "w2", Type: events.DetermineStart, State: events.StateDetermine},
		{Time: at(5), Recipe: "lock", Path: "/l", Instance: "w1", Type: events.Lost, State: events.StateFailed, Err: errors.New("lock: session lost")},
		{Time: at(6), Recipe: "lock", Path: "/l", Instance: "w2", Type: events.ElectedComplete, State: events.StateLeader, Term: 1},
	} {
		recs = append(recs, observers.RecordOf(ev))
	}
	var buf bytes.Buffer
	if err := observers.WriteChromeTrace(&buf, recs); err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   float64        `json:"ts"`
			Dur  *float64       `json:"dur"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &trace); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, buf.String())
	}
	lanes := map[int]string{}
	states := map[int][]string{}
	var instants, lost int
	end := map[int]float64{}
	for _, e := range trace.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" {
				lanes[e.Tid] = e.Args["name"].(string)
			}
		case "X":
			if e.Dur == nil {
				t.Fatalf("state %s at %v has no duration", e.Name, e.Ts)
			}
			if e.Ts != end[e.Tid] {
				t.Errorf("lane %d: state %s starts at %v, the last ended at %v", e.Tid, e.Name, e.Ts, end[e.Tid])
			}
			end[e.Tid] = e.Ts + *e.Dur
			states[e.Tid] = append(states[e.Tid], e.Name)
		case "i":
			instants++
			if e.Name == "LOST" {
				lost++
				if e.Args["err"] != "lock: session lost" || e.Ts != 5000 {
					t.Errorf("LOST instant: ts %v, args %v", e.Ts, e.Args)
				}
			}
		}
	}
	if len(lanes) != 2 || lanes[1] != "w1" || lanes[2] != "w2" {
		t.Errorf("lanes %v, want w1 and w2", lanes)
	}
	if instants != 6 || lost != 1 {
		t.Errorf("%d instants (%d LOST), want 6 (1)", instants, lost)
	}
	if got := states[1]; len(got) != 3 || got[0] != "START" || got[1] != "LEADER" || got[2] != "FAILED" {
		t.Errorf("w1's states %v", got)
	}
	for tid, e := range end {
		if e != 6000 {
			t.Errorf("lane %d ends at %v, want the last record's 6000µs", tid, e)
		}
	}
}
