package observers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/observers"
)

func TestTimelineRoundTrip(t *testing.T) {
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid := trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	var evs []events.Event
	for typ := events.Start; typ <= events.RevokeRequested; typ++ { // every type's name goes and comes back
		evs = append(evs, events.Event{Time: t0, Recipe: "election", Path: "/e", Instance: "n1", Type: typ, State: events.StateReady, Phase: lockPhases[typ], Term: 2})
	}
	evs = append(evs, events.Event{
		Time: t0, Recipe: "lock", Path: "/app/l", Instance: "w1", Type: events.Failed, State: events.StateFailed,
		Phase: events.PhaseFailed, Term: 3, Node: "/app/l/_c_u-lock-0000000007", SessionID: -0x7f00000000000001, Token: 0x1c,
		Err: errors.New("lock: session lost"), TraceID: tid, SpanID: sid,
	}, events.Event{Time: t0, Recipe: "lock", Path: "/app/l", Instance: "w1", Type: events.Overflow, Missed: 9})

	var buf bytes.Buffer
	bus := events.NewBus()
	o := observers.Timeline(bus, &buf)
	for _, ev := range evs {
		bus.Publish(ev)
	}
	bus.Close()
	waitDone(t, o)
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(evs) {
		t.Fatalf("%d lines, want %d", len(lines), len(evs))
	}
	wantLine := `{"time":"2026-11-22T19:21:50.123456789Z","recipe":"lock","path":"/app/l","instance":"w1","type":"FAILED","state":"FAILED",` +
		`"phase":"failed","term":3,"node":"/app/l/_c_u-lock-0000000007","token":"0x1c","session":"0x80ffffffffffffff","err":"lock: session lost",` +
		`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}`
	if got := lines[len(lines)-2]; got != wantLine {
		t.Errorf("line\n%s\nwant\n%s", got, wantLine)
	}
	if got, want := lines[len(lines)-1], `"type":"OVERFLOW","state":"","missed":9}`; !strings.HasSuffix(got, want) {
		t.Errorf("overflow line %s, want it to end %s", got, want)
	}

	recs, err := observers.ReadTimeline(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(evs) {
		t.Fatalf("read %d records, want %d", len(recs), len(evs))
	}
	for i, ev := range evs {
		want := observers.Record{
			Time: ev.Time, Recipe: ev.Recipe, Path: ev.Path, Instance: ev.Instance, Type: ev.Type, State: ev.State,
			Phase: ev.Phase, Term: ev.Term, Node: ev.Node, Token: ev.Token, Session: ev.SessionID, TraceID: ev.TraceID, SpanID: ev.SpanID, Missed: ev.Missed,
		}
		if ev.Err != nil {
			want.Err = ev.Err.Error()
		}
		if !reflect.DeepEqual(recs[i], want) {
			t.Errorf("record %d:\n%+v\nwant\n%+v", i, recs[i], want)
		}
	}
}

func TestTimelineWritesUTC(t *testing.T) {
	b, err := json.Marshal(observers.Record{Time: t0.In(fixedZone), Type: events.Start})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"time":"2026-11-22T19:21:50.123456789Z",`) {
		t.Errorf("%s: want the time in UTC", b)
	}
}

func TestReadTimelineRejectsBadRecords(t *testing.T) {
	good := `{"time":"2026-11-22T19:21:50Z","recipe":"lock","path":"/x","instance":"a","type":"START","state":"START"}` + "\n"
	tests := []struct {
		name, input, want string
	}{
		{"cut short", good + `{"time":"2026-11-22T19:21:50Z","rec`, "record 2"},
		{"unknown type", good + strings.Replace(good, "START\",\"state", "BOGUS\",\"state", 1), `unknown event type "BOGUS"`},
		{"unknown phase", good + strings.Replace(good, `"state":"START"`, `"state":"START","phase":"over"`, 1), `unknown phase "over"`},
		{"bad token", good + strings.Replace(good, `"state":"START"`, `"state":"START","token":"28"`, 1), `token "28"`},
		{"bad session", good + strings.Replace(good, `"state":"START"`, `"state":"START","session":"0xzz"`, 1), `session "0xzz"`},
		{"bad time", good + strings.Replace(good, "2026-11-22T19:21:50Z", "yesterday", 1), "yesterday"},
		{"bad trace id", good + strings.Replace(good, `"state":"START"`, `"state":"START","trace_id":"00"`, 1), "record 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := observers.ReadTimeline(strings.NewReader(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
			if len(recs) != 1 || recs[0].Type != events.Start {
				t.Errorf("records before the bad one: %+v", recs)
			}
		})
	}
}

func TestTimelineReportsWhatABoundedObserverMissed(t *testing.T) {
	const n = 50
	bus := events.NewBus()
	g := newGate()
	o := observers.Timeline(observers.Bounded(bus, 2), g)
	pileUp(t, bus, g, n)
	waitDone(t, o)
	recs, err := observers.ReadTimeline(&g.buf)
	if err != nil {
		t.Fatal(err)
	}
	var seen, missed uint64
	for _, r := range recs {
		if r.Type == events.Overflow {
			missed += r.Missed
		} else {
			seen++
		}
	}
	if seen+missed != n || missed == 0 {
		t.Errorf("%d written + %d missed, want %d in all, some missed", seen, missed, n)
	}
}
