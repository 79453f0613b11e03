package observers_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/observers"
)

// collected is one collection of a ManualReader, by metric name.
type collected struct {
	t     *testing.T
	scope string
	ver   string
	data  map[string]metricdata.Aggregation
}

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collected{t: t, data: make(map[string]metricdata.Aggregation)}
	for _, sm := range rm.ScopeMetrics {
		c.scope, c.ver = sm.Scope.Name, sm.Scope.Version
		for _, m := range sm.Metrics {
			c.data[m.Name] = m.Data
		}
	}
	return c
}

// key names an attribute set like "zkrecipes.event=START,zkrecipes.path=/x".
func key(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }

// counter returns the sums of a counter by attribute set.
func (c collected) counter(name string) map[string]int64 {
	c.t.Helper()
	out := make(map[string]int64)
	if c.data[name] == nil {
		return out
	}
	sum, ok := c.data[name].(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic {
		c.t.Fatalf("%s is %T, want a monotonic int64 sum", name, c.data[name])
	}
	for _, p := range sum.DataPoints {
		out[key(p.Attributes)] = p.Value
	}
	return out
}

// histogram returns the data points of a histogram by attribute set.
func (c collected) histogram(name string) map[string]metricdata.HistogramDataPoint[float64] {
	c.t.Helper()
	out := make(map[string]metricdata.HistogramDataPoint[float64])
	if c.data[name] == nil {
		return out
	}
	h, ok := c.data[name].(metricdata.Histogram[float64])
	if !ok {
		c.t.Fatalf("%s is %T, want a float64 histogram", name, c.data[name])
	}
	for _, p := range h.DataPoints {
		out[key(p.Attributes)] = p
	}
	return out
}

// observeMetrics runs Metrics over evs on a fresh bus and collects.
func observeMetrics(t *testing.T, evs []events.Event, opts ...observers.MetricsOption) collected {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	bus := events.NewBus()
	o, err := observers.Metrics(bus, append(opts, observers.WithMeterProvider(mp))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		bus.Publish(ev)
	}
	bus.Close()
	waitDone(t, o)
	return collect(t, reader)
}

// lockPhases are the phases the lock's machine gives its event types.
var lockPhases = map[events.Type]events.Phase{
	events.OfferStart: events.PhaseBegin, events.ElectedComplete: events.PhaseGranted,
	events.Failed: events.PhaseFailed, events.StopStart: events.PhaseEnded, events.StopComplete: events.PhaseEnded,
}

// at is event typ of instance "a", term n, s seconds after t0, with the
// phase the lock's machine gives it.
func at(s float64, typ events.Type, n uint64) events.Event {
	return events.Event{Time: t0.Add(time.Duration(s * float64(time.Second))), Recipe: "lock", Path: "/x", Instance: "a", Type: typ, Phase: lockPhases[typ], Term: n}
}

func TestMetricsDurationsPerTerm(t *testing.T) {
	evs := []events.Event{
		at(0, events.Start, 0),
		// Term 1: waits 2s, holds 3s, released.
		at(0, events.OfferStart, 1), at(0.5, events.ReadyStart, 1), at(2, events.ElectedStart, 1), at(2, events.ElectedComplete, 1),
		at(5, events.StopStart, 1), at(5.1, events.StopComplete, 1),
		// Term 2: fails after waiting 1s.
		at(10, events.OfferStart, 2), at(10, events.Suspended, 2), at(11, events.Failed, 2), at(12, events.Reconnected, 0),
		// Term 3: a try that did not get it, stopped after 0.25s.
		at(20, events.OfferStart, 3), at(20.25, events.StopStart, 3), at(20.5, events.StopComplete, 3),
		// Term 4: granted after 0.5s, lost after 4s.
		at(30, events.OfferStart, 4), at(30.5, events.ElectedComplete, 4), at(34.5, events.Lost, 4), at(34.5, events.Failed, 4),
		// Term 5: its STOP_START was missed; STOP_COMPLETE ends the wait.
		at(40, events.OfferStart, 5), {Recipe: "lock", Path: "/x", Instance: "a", Type: events.Overflow, Missed: 3},
		at(41, events.StopComplete, 5),
		// Term 6: its OFFER_START was missed: no durations.
		at(50, events.ElectedComplete, 6), at(51, events.StopStart, 6),
	}
	c := observeMetrics(t, evs)
	if c.scope != observers.ScopeName || c.ver != observers.Version {
		t.Errorf("scope %q %q, want %q %q", c.scope, c.ver, observers.ScopeName, observers.Version)
	}

	type hist struct {
		count uint64
		sum   float64
	}
	check := func(name string, want map[string]hist) {
		t.Helper()
		got := c.histogram(name)
		if len(got) != len(want) {
			t.Errorf("%s: %d series, want %d: %v", name, len(got), len(want), got)
		}
		for k, w := range want {
			p := got[k]
			if p.Count != w.count || p.Sum != w.sum {
				t.Errorf("%s{%s}: count %d sum %v, want count %d sum %v", name, k, p.Count, p.Sum, w.count, w.sum)
			}
		}
	}
	check("zkrecipes.acquire.duration", map[string]hist{
		"zkrecipes.outcome=granted,zkrecipes.path=/x,zkrecipes.recipe=lock": {2, 2.5},
		"zkrecipes.outcome=failed,zkrecipes.path=/x,zkrecipes.recipe=lock":  {1, 1},
		"zkrecipes.outcome=stopped,zkrecipes.path=/x,zkrecipes.recipe=lock": {2, 1.25},
	})
	check("zkrecipes.hold.duration", map[string]hist{
		"zkrecipes.outcome=stopped,zkrecipes.path=/x,zkrecipes.recipe=lock": {1, 3},
		"zkrecipes.outcome=failed,zkrecipes.path=/x,zkrecipes.recipe=lock":  {1, 4},
	})

	wantSession := map[string]int64{
		"zkrecipes.event=SUSPENDED,zkrecipes.path=/x,zkrecipes.recipe=lock":   1,
		"zkrecipes.event=RECONNECTED,zkrecipes.path=/x,zkrecipes.recipe=lock": 1,
		"zkrecipes.event=LOST,zkrecipes.path=/x,zkrecipes.recipe=lock":        1,
	}
	if got := c.counter("zkrecipes.session.events"); !maps.Equal(got, wantSession) {
		t.Errorf("session events %v, want %v", got, wantSession)
	}
	if got := c.counter("zkrecipes.events.missed"); got["zkrecipes.path=/x,zkrecipes.recipe=lock"] != 3 || len(got) != 1 {
		t.Errorf("missed %v, want 3", got)
	}
	lifecycle := c.counter("zkrecipes.events")
	var total int64
	for _, v := range lifecycle {
		total += v
	}
	if total != int64(len(evs)-4) { // all but 3 session events and the OVERFLOW
		t.Errorf("lifecycle events counted %d, want %d: %v", total, len(evs)-4, lifecycle)
	}
	if got := lifecycle["zkrecipes.event=OFFER_START,zkrecipes.path=/x,zkrecipes.recipe=lock"]; got != 5 {
		t.Errorf("OFFER_START counted %d, want 5", got)
	}
}

func TestMetricsWithoutPath(t *testing.T) {
	c := observeMetrics(t, []events.Event{
		at(0, events.OfferStart, 1), at(1, events.ElectedComplete, 1),
		{Recipe: "lock", Path: "/y", Instance: "b", Type: events.Suspended},
	}, observers.WithoutPath())
	want := map[string]map[string]int64{
		"zkrecipes.events": {
			"zkrecipes.event=OFFER_START,zkrecipes.recipe=lock":      1,
			"zkrecipes.event=ELECTED_COMPLETE,zkrecipes.recipe=lock": 1,
		},
		"zkrecipes.session.events": {"zkrecipes.event=SUSPENDED,zkrecipes.recipe=lock": 1},
	}
	for name, w := range want {
		if got := c.counter(name); !maps.Equal(got, w) {
			t.Errorf("%s: %v, want %v", name, got, w)
		}
	}
	acquire := c.histogram("zkrecipes.acquire.duration")
	if p, ok := acquire["zkrecipes.outcome=granted,zkrecipes.recipe=lock"]; !ok || p.Count != 1 || len(acquire) != 1 {
		t.Errorf("acquire.duration: %v, want one series without a path", acquire)
	}
}

func TestMetricsKeepsInstancesApart(t *testing.T) {
	b := func(s float64, typ events.Type, n uint64) events.Event {
		ev := at(s, typ, n)
		ev.Instance = "b"
		return ev
	}
	// a and b interleave on one path: each wait is measured from its own offer.
	c := observeMetrics(t, []events.Event{
		at(0, events.OfferStart, 1), b(1, events.OfferStart, 1),
		at(2, events.ElectedComplete, 1), at(3, events.StopStart, 1),
		b(7, events.ElectedComplete, 1),
	})
	p := c.histogram("zkrecipes.acquire.duration")["zkrecipes.outcome=granted,zkrecipes.path=/x,zkrecipes.recipe=lock"]
	if p.Count != 2 || p.Sum != 8 { // 2s for a, 6s for b
		t.Errorf("acquire: count %d sum %v, want 2 and 8", p.Count, p.Sum)
	}
}

// The durations come from what the events say (their phase), not from the
// lock's event types: another machine's events, of other types, are timed
// the same way.
func TestMetricsFromPhasesOfAnyMachine(t *testing.T) {
	ev := func(s float64, typ events.Type, ph events.Phase) events.Event {
		return events.Event{Time: t0.Add(time.Duration(s * float64(time.Second))), Recipe: "queue", Path: "/q", Instance: "c", Type: typ, Phase: ph, Term: 1}
	}
	c := observeMetrics(t, []events.Event{
		ev(0, events.DetermineStart, events.PhaseBegin),    // say, a take begins
		ev(1.5, events.ReadyComplete, events.PhaseGranted), // the item is ours
		ev(2, events.OfferStart, events.PhaseNone),         // an event of no phase changes nothing
		ev(4, events.StopStart, events.PhaseEnded),         // acked
	})
	acq := c.histogram("zkrecipes.acquire.duration")["zkrecipes.outcome=granted,zkrecipes.path=/q,zkrecipes.recipe=queue"]
	hold := c.histogram("zkrecipes.hold.duration")["zkrecipes.outcome=stopped,zkrecipes.path=/q,zkrecipes.recipe=queue"]
	if acq.Count != 1 || acq.Sum != 1.5 || hold.Count != 1 || hold.Sum != 2.5 {
		t.Fatalf("acquire %d/%v, hold %d/%v; want 1/1.5 and 1/2.5", acq.Count, acq.Sum, hold.Count, hold.Sum)
	}
}
