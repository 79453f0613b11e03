package observers

import (
	"strconv"

	"github.com/rs/zerolog"

	"github.com/zkrecipes/zkrecipes/events"
)

// Log writes one zerolog line per event to logger, at a level taken from
// what the event says (its phase, see events.Phase), whatever machine
// made it:
//
//	error  LOST (the session is gone, and with it every grant)
//	warn   a term that failed (FAILED, or any event of PhaseFailed), SUSPENDED, OVERFLOW
//	info   a term that begins, is granted or ends (PhaseBegin,
//	       PhaseGranted, PhaseEnded: for the lock and the election
//	       OFFER_START, ELECTED_COMPLETE, STOP_START, STOP_COMPLETE),
//	       RECONNECTED
//	debug  every other event
//
// so a logger at info level shows a line when an attempt starts, when it
// is granted and when it ends, and every trouble. The message is the event
// type; the fields are recipe, path, instance, event (the type again, for
// queries), state, and when set: phase, term, node, token and session
// (hex, like "0x1c"), err, trace_id and span_id (the span of the term),
// missed (on OVERFLOW). The time of the line is whatever logger adds: Log adds none.
// It never changes zerolog's globals; its lines obey the global level like
// any other.
func Log(src Source, logger zerolog.Logger) *Observer {
	return start(src, func(ev events.Event) error {
		logEvent(logger, ev)
		return nil
	})
}

func logLevel(ev events.Event) zerolog.Level {
	switch {
	case ev.Type == events.Lost:
		return zerolog.ErrorLevel
	case ev.Phase == events.PhaseFailed, ev.Type == events.Failed, ev.Type == events.Suspended, ev.Type == events.Overflow:
		return zerolog.WarnLevel
	case ev.Phase != events.PhaseNone, ev.Type == events.Reconnected, ev.Type == events.RevokeRequested:
		return zerolog.InfoLevel
	default:
		return zerolog.DebugLevel
	}
}

func logEvent(logger zerolog.Logger, ev events.Event) {
	e := logger.WithLevel(logLevel(ev))
	if e == nil {
		return
	}
	e = e.Str("recipe", ev.Recipe).Str("path", ev.Path).Str("instance", ev.Instance).
		Str("event", ev.Type.String()).Str("state", string(ev.State))
	if ev.Phase != events.PhaseNone {
		e = e.Str("phase", ev.Phase.String())
	}
	if ev.Term != 0 {
		e = e.Uint64("term", ev.Term)
	}
	if ev.Node != "" {
		e = e.Str("node", ev.Node)
	}
	if ev.Token != 0 {
		e = e.Str("token", hex(ev.Token))
	}
	if ev.SessionID != 0 {
		e = e.Str("session", hex(ev.SessionID))
	}
	if ev.Err != nil {
		e = e.Str("err", ev.Err.Error())
	}
	if ev.TraceID.IsValid() {
		e = e.Str("trace_id", ev.TraceID.String())
	}
	if ev.SpanID.IsValid() {
		e = e.Str("span_id", ev.SpanID.String())
	}
	if ev.Type == events.Overflow {
		e = e.Uint64("missed", ev.Missed)
	}
	e.Msg(ev.Type.String())
}

// hex formats a token or session id the way ZooKeeper's own logs do.
func hex(v int64) string { return "0x" + strconv.FormatUint(uint64(v), 16) }
