package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/looplab/fsm"

	"github.com/zkrecipes/zkrecipes/events"
)

// Trigger names a transition of an FSM.
type Trigger string

// Transition is one allowed move: Trigger takes the machine from any of
// From to To.
type Transition struct {
	Trigger Trigger
	From    []events.State
	To      events.State
}

// FSM is a state machine over the states its machine declares, built on
// looplab/fsm, without
// its traps: every state and trigger is checked when it is built (looplab
// ignores a callback keyed by a misspelled name), Fire never passes a
// cancellable context (a cancelled one wedges looplab's machine forever),
// a self-transition is success (looplab returns NoTransitionError), and no
// callback runs inside looplab, so none can deadlock it. Not safe for
// concurrent use: it belongs to one actor.
type FSM struct {
	// Fired, when set, is told of each transition Fire makes (a test
	// records with it which transitions its transcripts reach).
	Fired func(from events.State, t Trigger)

	f   *fsm.FSM
	bug error // the first transition fired where it is not allowed
}

// NewFSM builds a machine in state initial over the states its machine
// declares: initial and every state named in transitions must be one of
// them, and none may be empty or declared twice.
func NewFSM(states []events.State, initial events.State, transitions []Transition) (*FSM, error) {
	known := make(map[events.State]bool, len(states))
	for _, s := range states {
		if s == "" || known[s] {
			return nil, fmt.Errorf("runtime: state %q is empty or declared twice", s)
		}
		known[s] = true
	}
	if !known[initial] {
		return nil, fmt.Errorf("runtime: unknown initial state %q", initial)
	}
	evs := make(fsm.Events, 0, len(transitions))
	for _, t := range transitions {
		if t.Trigger == "" || len(t.From) == 0 {
			return nil, fmt.Errorf("runtime: transition %q needs a name and a source", t.Trigger)
		}
		src := make([]string, len(t.From))
		for i, s := range t.From {
			if !known[s] {
				return nil, fmt.Errorf("runtime: transition %q: unknown state %q", t.Trigger, s)
			}
			src[i] = string(s)
		}
		if !known[t.To] {
			return nil, fmt.Errorf("runtime: transition %q: unknown state %q", t.Trigger, t.To)
		}
		evs = append(evs, fsm.EventDesc{Name: string(t.Trigger), Src: src, Dst: string(t.To)})
	}
	return &FSM{f: fsm.NewFSM(string(initial), evs, fsm.Callbacks{})}, nil
}

// Current is the machine's state.
func (m *FSM) Current() events.State { return events.State(m.f.Current()) }

// Can reports whether t is allowed in the current state.
func (m *FSM) Can(t Trigger) bool { return m.f.Can(string(t)) }

// Fire moves the machine by t. When t is not allowed in the current state
// it leaves the state as it was and returns the error, which Bug keeps:
// a machine fires only what its own code allows, so that is a bug in the
// machine, never its input's doing, and its Shell reports it (Bug).
func (m *FSM) Fire(t Trigger) error {
	from := m.Current()
	err := m.f.Event(context.Background(), string(t))
	var none fsm.NoTransitionError
	if err == nil || (errors.As(err, &none) && none.Err == nil) {
		if m.Fired != nil {
			m.Fired(from, t)
		}
		return nil
	}
	err = fmt.Errorf("runtime: %s in state %s: %w", t, m.Current(), err)
	if m.bug == nil {
		m.bug = err
	}
	return err
}

// Bug is the first transition fired where it was not allowed (nil: none).
// A machine that returns it from a Bug method of its own has it reported
// by its Shell: a FAILED event carrying it, once.
func (m *FSM) Bug() error { return m.bug }

// Mermaid renders the machine as a Mermaid state diagram (sorted, so it is
// stable enough for golden files).
func (m *FSM) Mermaid() string {
	s, err := fsm.VisualizeWithType(m.f, fsm.MermaidStateDiagram)
	if err != nil {
		return err.Error()
	}
	return s
}
