// Package observers turns the lifecycle events of recipes into logs,
// metrics and a timeline file. Each observer is a subscriber on a recipe's
// event bus (anything with a Subscribe method: a lock, an election, an
// events.Bus), with one goroutine of its own:
//
//	l, _ := lock.New(conn, "/app/locks/orders")
//	logs := observers.Log(l, logger)                                   // zerolog, one line per event
//	stats, err := observers.Metrics(l, observers.WithMeterProvider(mp)) // OpenTelemetry counters and histograms
//	tl := observers.Timeline(l, file)                                  // JSON Lines, read back with ReadTimeline
//	...
//	l.Close()   // the observers handle what was queued and stop: <-logs.Done()
//
// An observer never slows the recipe: the bus queues its events, and an
// observer that must not queue without bound (a log writer that may block)
// is given a Bounded source. One that falls behind a bound then receives an
// OVERFLOW event with the number of events it missed, and reports it: a
// warning in the log, the zkrecipes.events.missed counter, a record with
// "missed" in the timeline.
//
// An observer sees the events published after it subscribed: attach it
// right after creating the recipe, before its first call. START is
// published as the recipe is created and may come before any subscriber.
//
// TraceFile is for looking at a run with no tracing backend: an
// sdktrace.SpanExporter and an event subscriber in one, it writes a
// self-contained HTML timeline (a lane per instance, states as bars, spans
// nested below, faults marked) and Chrome Trace Event JSON, and with
// WithRecording a JSON Lines file a running service can keep, which
// ReadRecording and `zkr trace FILE -html OUT` render later.
//
// Stop an observer with Close, which drops events still queued for it; to
// see a recipe's last events, close the recipe first and wait on Done.
package observers
