package observers_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/observers"
)

// logLines logs evs through a fresh bus and returns the JSON lines.
func logLines(t *testing.T, logger func(*bytes.Buffer) zerolog.Logger, evs ...events.Event) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	bus := events.NewBus()
	o := observers.Log(bus, logger(&buf))
	for _, ev := range evs {
		bus.Publish(ev)
	}
	bus.Close()
	waitDone(t, o)
	return parseLines(t, buf.Bytes())
}

func parseLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func plain(b *bytes.Buffer) zerolog.Logger { return zerolog.New(b) }

// The lock's events, with the phases its machine gives them, log at these
// levels.
func TestLogLevelOfTheLocksEvents(t *testing.T) {
	want := map[events.Type]string{
		events.Start: "debug", events.OfferStart: "info", events.OfferComplete: "debug",
		events.DetermineStart: "debug", events.DetermineComplete: "debug",
		events.ReadyStart: "debug", events.ReadyComplete: "debug",
		events.ElectedStart: "debug", events.ElectedComplete: "info",
		events.Failed: "warn", events.StopStart: "info", events.StopComplete: "info",
		events.Suspended: "warn", events.Reconnected: "info", events.Lost: "error", events.Overflow: "warn",
		events.RevokeRequested: "info",
	}
	for typ, level := range want {
		t.Run(typ.String(), func(t *testing.T) {
			lines := logLines(t, plain, events.Event{Recipe: "lock", Path: "/x", Instance: "a", Type: typ, Phase: lockPhases[typ]})
			if len(lines) != 1 {
				t.Fatalf("%d lines, want 1", len(lines))
			}
			if got := lines[0]["level"]; got != level {
				t.Errorf("level %v, want %s", got, level)
			}
			if got := lines[0]["message"]; got != typ.String() {
				t.Errorf("message %v, want %s", got, typ)
			}
			if ph := lockPhases[typ]; ph != events.PhaseNone && lines[0]["phase"] != ph.String() {
				t.Errorf("phase %v, want %s", lines[0]["phase"], ph)
			}
		})
	}
}

// The level comes from what the event says, not from the lock's types:
// another machine's events (a queue's take, say) whose phases differ log
// by their phases.
func TestLogLevelFollowsThePhase(t *testing.T) {
	for _, tc := range []struct {
		typ   events.Type
		phase events.Phase
		level string
	}{
		{events.DetermineStart, events.PhaseBegin, "info"},
		{events.ReadyComplete, events.PhaseGranted, "info"},
		{events.ElectedStart, events.PhaseFailed, "warn"},
		{events.OfferComplete, events.PhaseEnded, "info"},
		{events.OfferStart, events.PhaseNone, "debug"},
	} {
		t.Run(tc.typ.String()+"/"+tc.phase.String(), func(t *testing.T) {
			lines := logLines(t, plain, events.Event{Recipe: "queue", Path: "/q", Instance: "c", Type: tc.typ, Phase: tc.phase})
			if len(lines) != 1 {
				t.Fatalf("%d lines, want 1", len(lines))
			}
			if got := lines[0]["level"]; got != tc.level {
				t.Errorf("level %v, want %s", got, tc.level)
			}
		})
	}
}

func TestLogFields(t *testing.T) {
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid := trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	base := map[string]any{"recipe": "lock", "path": "/app/l", "instance": "w1"}
	with := func(kv map[string]any) map[string]any {
		m := maps.Clone(base)
		maps.Copy(m, kv)
		return m
	}
	tests := []struct {
		name string
		ev   events.Event
		want map[string]any
	}{{
		name: "everything set",
		ev: events.Event{Time: t0, Recipe: "lock", Path: "/app/l", Instance: "w1", Type: events.Failed, Phase: events.PhaseFailed, State: events.StateFailed,
			Term: 3, Node: "/app/l/_c_u-lock-0000000007", SessionID: 0x0100000000000001, Token: 0x1c,
			Err: errors.New("lock: session lost"), TraceID: tid, SpanID: sid},
		want: with(map[string]any{"level": "warn", "message": "FAILED", "event": "FAILED", "phase": "failed", "state": "FAILED", "term": 3.0,
			"node": "/app/l/_c_u-lock-0000000007", "token": "0x1c", "session": "0x100000000000001",
			"err": "lock: session lost", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}),
	}, {
		name: "unset fields left out",
		ev:   events.Event{Recipe: "lock", Path: "/app/l", Instance: "w1", Type: events.Start, State: events.StateStart},
		want: with(map[string]any{"level": "debug", "message": "START", "event": "START", "state": "START"}),
	}, {
		name: "overflow says how many were missed",
		ev:   events.Event{Recipe: "lock", Path: "/app/l", Instance: "w1", Type: events.Overflow, Missed: 42},
		want: with(map[string]any{"level": "warn", "message": "OVERFLOW", "event": "OVERFLOW", "state": "", "missed": 42.0}),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := logLines(t, plain, tt.ev)
			if len(lines) != 1 {
				t.Fatalf("%d lines, want 1", len(lines))
			}
			if !maps.Equal(lines[0], tt.want) {
				t.Errorf("got  %v\nwant %v", lines[0], tt.want)
			}
		})
	}
}

func TestLogObeysTheLoggersLevel(t *testing.T) {
	info := func(b *bytes.Buffer) zerolog.Logger { return zerolog.New(b).Level(zerolog.InfoLevel) }
	lines := logLines(t, info,
		events.Event{Type: events.Start}, events.Event{Type: events.OfferStart, Phase: events.PhaseBegin, Term: 1},
		events.Event{Type: events.DetermineStart, Term: 1}, events.Event{Type: events.ElectedComplete, Phase: events.PhaseGranted, Term: 1},
		events.Event{Type: events.Lost, Term: 1})
	var got []any
	for _, l := range lines {
		got = append(got, l["event"])
	}
	want := []any{"OFFER_START", "ELECTED_COMPLETE", "LOST"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("logged %v, want %v", got, want)
	}
}

func TestLogReportsWhatABoundedObserverMissed(t *testing.T) {
	const n = 50
	bus := events.NewBus()
	g := newGate()
	o := observers.Log(observers.Bounded(bus, 2), zerolog.New(g))
	pileUp(t, bus, g, n)
	waitDone(t, o)

	var seen, missed, overflows int
	var last float64
	for _, l := range parseLines(t, g.buf.Bytes()) {
		if l["event"] == "OVERFLOW" {
			overflows++
			if l["level"] != "warn" {
				t.Errorf("OVERFLOW at level %v", l["level"])
			}
			missed += int(l["missed"].(float64))
			continue
		}
		seen++
		last = l["term"].(float64)
	}
	// One OVERFLOW, or two when the bus's pump took the first before the
	// publishing was over: either way every event is logged or counted.
	if overflows == 0 || seen+missed != n {
		t.Errorf("%d logged + %d missed (in %d OVERFLOW lines), want %d in all", seen, missed, overflows, n)
	}
	if last != n {
		t.Errorf("last logged event %v, want the newest, %d", last, n)
	}
}
