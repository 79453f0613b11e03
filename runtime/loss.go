package runtime

import "sync"

// Loss is the end of a grant (a lock hold, a leadership term, a lease): a
// channel closed once, and the reason it was closed. The actor that owns
// the grant closes it; any goroutine may wait on Done and read Err.
type Loss struct {
	once  sync.Once
	done  chan struct{}
	mu    sync.Mutex
	cause error
}

// NewLoss returns a Loss that has not happened yet.
func NewLoss() *Loss { return &Loss{done: make(chan struct{})} }

// Done is closed when the grant has ended.
func (l *Loss) Done() <-chan struct{} { return l.done }

// Err is nil while the grant holds, and afterwards the cause given to the
// first Close.
func (l *Loss) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

// Close ends the grant with cause; later calls change nothing.
func (l *Loss) Close(cause error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.cause = cause
		l.mu.Unlock()
		close(l.done)
	})
}
