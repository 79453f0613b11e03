package golden

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Transcript writes a pure machine's steps as text, for Check: each input
// ("> …"), then its output's events, replies and commands, Done, and the
// machine's state after ("= …"). The machine's test says how its events
// and reply values read.
type Transcript struct {
	T     testing.TB
	State func() events.State
	// Event is an event's line after "Event " (its error is added).
	Event func(events.Event) string
	// Value is a reply value's text after "Reply req=N" ("" for none);
	// nil shows no values.
	Value func(any) string

	b strings.Builder
}

// Record writes the step of input in (its String) and its output.
func Record[C runtime.Command](tr *Transcript, in string, out runtime.Output[C]) {
	fmt.Fprintf(&tr.b, "> %s\n", in)
	for _, e := range out.Events {
		fmt.Fprintf(&tr.b, "  Event %s", tr.Event(e))
		if e.Err != nil {
			fmt.Fprintf(&tr.b, " err=%v", e.Err)
		}
		fmt.Fprintln(&tr.b)
	}
	for _, r := range out.Replies {
		fmt.Fprintf(&tr.b, "  Reply req=%d", r.Req)
		if tr.Value != nil {
			if v := tr.Value(r.Value); v != "" {
				fmt.Fprintf(&tr.b, " %s", v)
			}
		}
		if r.Err != nil {
			fmt.Fprintf(&tr.b, " err=%v", r.Err)
		}
		fmt.Fprintln(&tr.b)
	}
	for _, c := range out.Commands {
		fmt.Fprintf(&tr.b, "  %v\n", c)
	}
	if out.Done {
		fmt.Fprintf(&tr.b, "  Done\n")
	}
	fmt.Fprintf(&tr.b, "  = %s\n", tr.State())
}

// Check compares what was written with testdata/<name>.txt (see Check).
func (tr *Transcript) Check(name string) {
	tr.T.Helper()
	Check(tr.T, name, tr.b.String())
}

// String is what was written so far.
func (tr *Transcript) String() string { return tr.b.String() }

// Append writes s as it is (another transcript's text, to check two
// machines' steps as one).
func (tr *Transcript) Append(s string) { tr.b.WriteString(s) }
