// Package planted exports a Machine, for apicheck's test to find.
package planted

// Machine is exported where it should not be.
type Machine struct{}

func newMachine() *Machine { return &Machine{} }

type config struct{}
