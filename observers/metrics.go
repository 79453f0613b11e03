package observers

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/zkrecipes/zkrecipes/events"
)

// ScopeName is the instrumentation scope of the metrics Metrics records.
const ScopeName = "github.com/zkrecipes/zkrecipes/observers"

// Version is this package's version, reported with its metrics.
const Version = "0.1.0"

// Attribute keys on the metrics.
const (
	AttrRecipe  = attribute.Key("zkrecipes.recipe")  // "lock", "election", ...
	AttrPath    = attribute.Key("zkrecipes.path")    // the recipe's directory; dropped by WithoutPath
	AttrEvent   = attribute.Key("zkrecipes.event")   // an event type: "ELECTED_COMPLETE", "SUSPENDED", ...
	AttrOutcome = attribute.Key("zkrecipes.outcome") // how a wait or a hold ended
)

// Outcomes, the values of AttrOutcome.
const (
	OutcomeGranted = "granted" // the wait ended with a grant (PhaseGranted: the lock's ELECTED_COMPLETE)
	OutcomeFailed  = "failed"  // the wait or hold ended with a failure (PhaseFailed: FAILED)
	OutcomeStopped = "stopped" // the wait or hold ended otherwise (PhaseEnded: STOP; released, resigned, cancelled, closed, a try that did not get it)
)

// MetricsOption configures Metrics.
type MetricsOption func(*metricsConfig)

type metricsConfig struct {
	mp       metric.MeterProvider
	withPath bool
}

// WithMeterProvider sets where the metrics go. Default (and when mp is
// nil): otel's global provider, a no-op until the application installs one.
func WithMeterProvider(mp metric.MeterProvider) MetricsOption {
	return func(c *metricsConfig) {
		if mp != nil {
			c.mp = mp
		}
	}
}

// WithoutPath leaves the zkrecipes.path attribute off every metric, for
// applications with many recipe paths (one lock per order id, say), where
// one series per path would cost too much. Default: path is recorded.
func WithoutPath() MetricsOption { return func(c *metricsConfig) { c.withPath = false } }

// durationBuckets are the histogram bounds in seconds: waits and holds run
// from milliseconds (an uncontended lock) to an hour (a long leadership).
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Metrics records the events of src as OpenTelemetry metrics, under the
// scope ScopeName:
//
//	zkrecipes.events            counter {event}  every event except session events and OVERFLOW, by recipe, path, event
//	zkrecipes.session.events    counter {event}  SUSPENDED, RECONNECTED, LOST, by recipe, path, event (each recipe
//	                                             instance on a connection reports the connection's changes)
//	zkrecipes.events.missed     counter {event}  events this observer missed (the sum of OVERFLOW counts), by recipe, path
//	zkrecipes.acquire.duration  histogram s      per term, begin → granted (outcome granted), failed (failed)
//	                                             or ended (stopped), by recipe, path, outcome
//	zkrecipes.hold.duration     histogram s      per term, granted → failed (failed) or ended (stopped),
//	                                             by recipe, path, outcome
//
// Terms are timed from what their events say (events.Phase), whatever
// machine made them: for the lock and the election, begin is OFFER_START,
// granted ELECTED_COMPLETE, failed FAILED, and ended STOP_START (or its
// STOP_COMPLETE, when the STOP_START was missed). Durations are measured
// between the events' own times, so they do not depend on how late the
// observer runs. A term whose beginning was missed (an OVERFLOW, or a
// subscription made late) records no duration.
//
// It fails only when an instrument cannot be created; then nothing is
// subscribed.
func Metrics(src Source, opts ...MetricsOption) (*Observer, error) {
	cfg := metricsConfig{mp: otel.GetMeterProvider(), withPath: true}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := newMeters(cfg)
	if err != nil {
		return nil, err
	}
	return start(src, func(ev events.Event) error {
		m.record(ev)
		return nil
	}), nil
}

type meters struct {
	withPath bool
	events   metric.Int64Counter
	session  metric.Int64Counter
	missed   metric.Int64Counter
	acquire  metric.Float64Histogram
	hold     metric.Float64Histogram

	// Owned by the observer's goroutine: the open term of each instance.
	terms map[instanceKey]*term
}

type instanceKey struct{ recipe, path, instance string }

// term is one acquisition in progress: waiting, or holding since held.
type term struct {
	n       uint64
	offered time.Time
	granted bool
	held    time.Time
}

func newMeters(cfg metricsConfig) (*meters, error) {
	meter := cfg.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version))
	m := &meters{withPath: cfg.withPath, terms: make(map[instanceKey]*term)}
	var errs [5]error
	m.events, errs[0] = meter.Int64Counter("zkrecipes.events", metric.WithUnit("{event}"),
		metric.WithDescription("Lifecycle events of recipe instances, session events aside."))
	m.session, errs[1] = meter.Int64Counter("zkrecipes.session.events", metric.WithUnit("{event}"),
		metric.WithDescription("Session events (SUSPENDED, RECONNECTED, LOST) seen by recipe instances."))
	m.missed, errs[2] = meter.Int64Counter("zkrecipes.events.missed", metric.WithUnit("{event}"),
		metric.WithDescription("Events an observer missed because it fell behind its bounded queue."))
	m.acquire, errs[3] = meter.Float64Histogram("zkrecipes.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the start of an attempt (the lock's OFFER_START) to the end of its wait: granted, failed or stopped."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.hold, errs[4] = meter.Float64Histogram("zkrecipes.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a grant (the lock's ELECTED_COMPLETE) to its end (STOP_START or FAILED)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *meters) attrs(ev events.Event, extra ...attribute.KeyValue) metric.MeasurementOption {
	kv := append(make([]attribute.KeyValue, 0, 2+len(extra)), AttrRecipe.String(ev.Recipe))
	if m.withPath {
		kv = append(kv, AttrPath.String(ev.Path))
	}
	return metric.WithAttributes(append(kv, extra...)...)
}

func (m *meters) record(ev events.Event) {
	ctx := context.Background()
	switch ev.Type {
	case events.Overflow:
		m.missed.Add(ctx, int64(ev.Missed), m.attrs(ev))
		return
	case events.Suspended, events.Reconnected, events.Lost:
		m.session.Add(ctx, 1, m.attrs(ev, AttrEvent.String(ev.Type.String())))
		return
	}
	m.events.Add(ctx, 1, m.attrs(ev, AttrEvent.String(ev.Type.String())))

	// Terms are timed from what the events say of them (their phase),
	// whatever machine made them.
	key := instanceKey{ev.Recipe, ev.Path, ev.Instance}
	if ev.Phase == events.PhaseBegin {
		m.terms[key] = &term{n: ev.Term, offered: ev.Time}
		return
	}
	t, ok := m.terms[key]
	if !ok || t.n != ev.Term {
		return
	}
	switch ev.Phase {
	case events.PhaseGranted:
		if !t.granted {
			m.acquire.Record(ctx, seconds(ev.Time.Sub(t.offered)), m.attrs(ev, AttrOutcome.String(OutcomeGranted)))
			t.granted, t.held = true, ev.Time
		}
	case events.PhaseFailed:
		m.end(ev, t, OutcomeFailed)
		delete(m.terms, key)
	case events.PhaseEnded:
		m.end(ev, t, OutcomeStopped)
		delete(m.terms, key)
	}
}

// end records how term t ended: its wait, or its hold.
func (m *meters) end(ev events.Event, t *term, outcome string) {
	ctx := context.Background()
	if !t.granted {
		m.acquire.Record(ctx, seconds(ev.Time.Sub(t.offered)), m.attrs(ev, AttrOutcome.String(outcome)))
	} else {
		m.hold.Record(ctx, seconds(ev.Time.Sub(t.held)), m.attrs(ev, AttrOutcome.String(outcome)))
	}
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }
