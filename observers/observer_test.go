package observers_test

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/observers"
)

var (
	_ observers.Source = (*events.Bus)(nil)
	_ observers.Source = (*lock.Lock)(nil)
	_ observers.Source = (*election.Election)(nil)
)

func TestObserverStopsWhenTheSourceCloses(t *testing.T) {
	bus := events.NewBus()
	o := observers.Log(bus, zerolog.Nop())
	bus.Publish(numbered(1))
	bus.Close()
	waitDone(t, o)
	if err := o.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
}

func TestObserverOnAClosedSourceStopsAtOnce(t *testing.T) {
	bus := events.NewBus()
	bus.Close()
	waitDone(t, observers.Log(bus, zerolog.Nop()))
}

func TestObserverCloseStopsItWhileTheSourceRuns(t *testing.T) {
	bus := events.NewBus()
	defer bus.Close()
	o := observers.Log(bus, zerolog.Nop())
	bus.Publish(numbered(1))
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-o.Done():
	default:
		t.Fatal("Done open after Close")
	}
	if err := o.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	bus.Publish(numbered(2)) // nobody listens: must not block
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestObserverStopsAtItsFirstError(t *testing.T) {
	bus := events.NewBus()
	defer bus.Close()
	boom := errors.New("disk full")
	o := observers.Timeline(bus, failingWriter{boom})
	if o.Err() != nil {
		t.Fatalf("Err = %v before any event", o.Err())
	}
	bus.Publish(numbered(1))
	waitDone(t, o)
	if !errors.Is(o.Err(), boom) {
		t.Fatalf("Err = %v, want %v", o.Err(), boom)
	}
	for i := 2; i < 100; i++ {
		bus.Publish(numbered(i)) // the stopped observer no longer subscribes
	}
	if err := o.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want %v", err, boom)
	}
}
