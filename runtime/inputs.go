package runtime

import (
	"fmt"
	"reflect"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// The standard inputs: the Shell makes them itself and posts them to
// every machine it runs, whose input type must admit them (Run panics
// otherwise). A machine's Step switches on them as on its own inputs;
// transcripts show each by its String.

// SessionChange is a change of the connection's session state.
type SessionChange struct {
	State     zk.SessionState
	SessionID int64
}

// Cancel withdraws call Req: its caller stopped waiting (Spec.Withdraw
// says which calls get one). Withdrawn, the call gets no answer.
type Cancel struct{ Req uint64 }

// Shutdown asks the machine to let go of what it holds and finish
// (Shell.Close); its reply comes when the deletes are done.
type Shutdown struct{ Req uint64 }

// Handover gives up on the deletes a Shutdown still waits for (the
// connection is down): its reply's Value is the Leftovers, which Close
// gives the connection's janitor (HandOver); any other Value: none. A
// machine with nothing to delete takes it as a Shutdown.
type Handover struct{ Req uint64 }

func (i SessionChange) String() string { return fmt.Sprintf("session %s %#x", i.State, i.SessionID) }
func (i Cancel) String() string        { return fmt.Sprintf("cancel req=%d", i.Req) }
func (i Shutdown) String() string      { return fmt.Sprintf("shutdown req=%d", i.Req) }
func (i Handover) String() string      { return fmt.Sprintf("handover req=%d", i.Req) }

// admitsStandardInputs panics unless In holds every standard input: a
// machine that could not be given one would miss a session change or a
// shutdown.
func admitsStandardInputs[In any](recipe string) {
	for _, x := range []any{SessionChange{}, Cancel{}, Shutdown{}, Handover{}} {
		if _, ok := x.(In); !ok {
			panic(fmt.Sprintf("runtime: %s's input type %v does not admit the shell's %T", recipe, reflect.TypeFor[In](), x))
		}
	}
}
