package runtime

import "sync"

// Signal is a one-time notice to a grant's holder (a revocation request): a
// channel closed once. The actor that owns the grant raises it; any
// goroutine may wait on Done.
type Signal struct {
	once sync.Once
	done chan struct{}
}

// NewSignal returns a Signal not raised yet.
func NewSignal() *Signal { return &Signal{done: make(chan struct{})} }

// Done is closed once the signal is raised.
func (s *Signal) Done() <-chan struct{} { return s.done }

// Raise raises the signal; later calls change nothing.
func (s *Signal) Raise() { s.once.Do(func() { close(s.done) }) }
