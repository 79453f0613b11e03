package barrier

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// The Barrier's machine is START while open, STOP once closed.
var (
	barrierStates      = []events.State{events.StateStart, events.StateStop}
	barrierTransitions = []runtime.Transition{{Trigger: trStopped, From: []events.State{events.StateStart}, To: events.StateStop}}
)

// barrierReply is a request's reply; for a wait, whether the node exists
// (then a watch was left on it).
type barrierReply struct {
	Cmd    uint64
	Exists bool
	Err    error
}

// barrierEvent: the watch a wait left fired.
type barrierEvent struct {
	Cmd  uint64
	Type zk.EventType
}

func (i barrierEvent) String() string { return fmt.Sprintf("event cmd=%d %s", i.Cmd, i.Type) }
func (i barrierReply) String() string {
	return fmt.Sprintf("reply cmd=%d exists=%t err=%v", i.Cmd, i.Exists, i.Err)
}

// barrierMachine is a Barrier: a pure machine, run by a runtime.Shell. Its
// calls are independent of each other: a Set or Remove is one request, a
// Wait a watch on the node, made again when it ends other than by the
// node's deletion, once the connection is back (on the same session or
// another: the node is not ours, a session's end changes nothing).
type barrierMachine struct {
	base
	calls  map[uint64]call // per command in flight: its call
	parked []call          // Waits whose watch is made again once the connection is back
	down   bool            // the connection is down
}

func newBarrierMachine() *barrierMachine {
	return &barrierMachine{base: newBase(barrierStates, barrierTransitions), calls: make(map[uint64]call)}
}

func (m *barrierMachine) Start() out {
	return out{Events: []events.Event{{Type: events.Start, State: m.State()}}}
}

func (m *barrierMachine) Step(in input) out {
	var o out
	switch i := in.(type) {
	case call:
		m.request(&o, i)
	case runtime.Cancel:
		for cmd, c := range m.calls {
			if c.Req == i.Req {
				delete(m.calls, cmd)
			}
		}
		m.parked = slices.DeleteFunc(m.parked, func(c call) bool { return c.Req == i.Req })
	case runtime.Handover: // never needed: nothing to delete
		return m.Step(runtime.Shutdown(i))
	case runtime.Shutdown:
		m.stop(&o)
		reply(&o, i.Req, nil, nil)
	case barrierReply:
		c, ok := m.calls[i.Cmd]
		switch {
		case !ok, c.Op == opWait && i.Err == nil && i.Exists:
			// a call withdrawn, or a watch left: its event comes
		case c.Op == opWait && (errors.Is(i.Err, zk.ErrConnectionLoss) || errors.Is(i.Err, zk.ErrSessionExpired)):
			delete(m.calls, i.Cmd)
			m.again(&o, c)
		default:
			delete(m.calls, i.Cmd)
			err := i.Err
			if errors.Is(err, zk.ErrClosed) {
				err = ErrClosed // the connection is: as when its CLOSED comes first
			}
			reply(&o, c.Req, nil, err)
		}
	case barrierEvent:
		c, ok := m.calls[i.Cmd]
		delete(m.calls, i.Cmd)
		switch {
		case !ok:
		case i.Type == zk.EventNodeDeleted:
			reply(&o, c.Req, nil, nil)
		default: // its data was set, or the watch ended with the session
			m.again(&o, c)
		}
	case runtime.SessionChange:
		switch i.State {
		case zk.StateSuspended:
			m.down = true
			m.event(&o, events.Suspended)
		case zk.StateLost:
			m.down = true
			m.event(&o, events.Lost)
		case zk.StateReconnected, zk.StateConnected:
			if i.State == zk.StateReconnected {
				m.event(&o, events.Reconnected)
			}
			m.down = false
			for _, c := range m.parked {
				m.request(&o, c)
			}
			m.parked = nil
		case zk.StateClosed:
			m.stop(&o) // nothing is left to do: no request can be made
		}
	}
	return o
}

func (m *barrierMachine) request(o *out, c call) {
	m.calls[m.send(o, command{Op: c.Op})] = c
}

// again makes Wait c's watch again, once the connection is up.
func (m *barrierMachine) again(o *out, c call) {
	if m.down {
		m.parked = append(m.parked, c)
		return
	}
	m.request(o, c)
}

// stop fails the calls in progress with ErrClosed and ends the machine.
func (m *barrierMachine) stop(o *out) {
	for _, cmd := range slices.Sorted(maps.Keys(m.calls)) {
		reply(o, m.calls[cmd].Req, nil, ErrClosed)
	}
	for _, c := range m.parked {
		reply(o, c.Req, nil, ErrClosed)
	}
	m.calls, m.parked = nil, nil
	m.event(o, events.StopStart)
	m.fsm.Fire(trStopped)
	m.event(o, events.StopComplete)
	o.Done = true
}

func (m *barrierMachine) event(o *out, t events.Type) {
	o.Events = append(o.Events, events.Event{Type: t, State: m.State()})
}
