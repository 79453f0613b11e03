package runtime

import (
	"context"
	"sync"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Actor runs a handler for each message of its mailbox on one goroutine.
type Actor[M any] struct {
	box    Mailbox[M]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines started by Go
	done   chan struct{}
}

// Spawn starts an actor. handle is called on the actor's goroutine for each
// message in order; it returns false to stop the actor. The ctx it gets is
// the actor's lifetime (cancelled when it stops), never a caller's.
func Spawn[M any](handle func(ctx context.Context, m M) (more bool)) *Actor[M] {
	ctx, cancel := context.WithCancel(context.Background())
	a := &Actor[M]{ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go a.run(handle)
	return a
}

func (a *Actor[M]) run(handle func(context.Context, M) bool) {
	defer close(a.done)
	defer a.wg.Wait()
	defer a.cancel()
	defer a.box.Close()
	for {
		select {
		case <-a.box.Ready():
			for _, m := range a.box.Take() {
				if !handle(a.ctx, m) {
					return
				}
			}
		case <-a.ctx.Done():
			return
		}
	}
}

// Post queues m for the actor. It never blocks; it reports false once the
// actor has stopped (m is dropped).
func (a *Actor[M]) Post(m M) bool { return a.box.Put(m) }

// Go runs call off the actor, under the actor's context, and posts its
// result back as a message. Call it only from the actor's own goroutine
// (inside handle).
func (a *Actor[M]) Go(call func(ctx context.Context) M) {
	a.Run(func(ctx context.Context) { a.Post(call(ctx)) })
}

// Run runs f off the actor, under the actor's context; Done waits for it.
// Call it only from the actor's own goroutine (inside handle).
func (a *Actor[M]) Run(f func(ctx context.Context)) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f(a.ctx)
	}()
}

// WatchSession posts wrap(ev) for every session state change of conn until
// the returned cancel func is called. This is the session fan-out: every
// actor on a connection subscribes for itself.
func WatchSession[M any](a *Actor[M], conn zk.Conn, wrap func(zk.SessionEvent) M) (cancel func()) {
	return conn.Subscribe(func(ev zk.SessionEvent) { a.Post(wrap(ev)) })
}

// Kill stops the actor without waiting for its handler to ask: the context
// of its in-flight requests is cancelled. Messages still queued are not
// handled. Kill does not wait; see Done.
func (a *Actor[M]) Kill() { a.cancel() }

// Done is closed once the actor's goroutine and every goroutine it started
// have ended.
func (a *Actor[M]) Done() <-chan struct{} { return a.done }
