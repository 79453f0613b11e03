package observers_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/observers"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// waitDone waits until o has stopped.
func waitDone(t *testing.T, o *observers.Observer) {
	t.Helper()
	select {
	case <-o.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("observer did not stop")
	}
}

// gate is a writer whose first Write blocks until release is closed, so a
// test can hold an observer still while events pile up behind it.
type gate struct {
	entered chan struct{} // closed when the first Write starts
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	buf     bytes.Buffer
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) Write(p []byte) (int, error) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the observer never wrote")
	}
}

// pileUp holds the observer on its first write (event 1), publishes events
// 2..n behind it, lets it go and closes the bus: with a bound of 2 the
// observer misses most of them.
func pileUp(t *testing.T, bus *events.Bus, g *gate, n int) {
	t.Helper()
	bus.Publish(numbered(1))
	g.waitEntered(t)
	for i := 2; i <= n; i++ {
		bus.Publish(numbered(i))
	}
	close(g.release)
	bus.Close()
}

// numbered is a lock event whose term is i, to tell events apart.
func numbered(i int) events.Event {
	return events.Event{Time: t0.Add(time.Duration(i) * time.Millisecond), Recipe: "lock", Path: "/x", Instance: "a",
		Type: events.DetermineStart, State: events.StateDetermine, Term: uint64(i)}
}

var t0 = time.Date(2026, 11, 22, 19, 21, 50, 123456789, time.UTC)

var fixedZone = time.FixedZone("UTC+9", 9*3600)
