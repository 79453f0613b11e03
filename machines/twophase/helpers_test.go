package twophase_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const root = "/app/2pc"

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rec is a Handler that records what it is asked. vote decides its votes
// (default yes); a gated transaction's Prepare waits for release.
type rec struct {
	mu       sync.Mutex
	changed  chan struct{}
	vote     func(tx twophase.Tx) (bool, error)
	gates    map[string]chan struct{}
	entered  map[string]int // Prepare calls begun, per tx
	prepared map[string]int // Prepare calls that returned, per tx
	outcomes map[string][]twophase.Outcome
	at       map[string]time.Time // when the first outcome of a tx came
	payloads map[string]string
	failing  int // Commit and Abort calls that fail before they succeed
	calls    int // Commit and Abort calls
}

func newRec() *rec {
	return &rec{changed: make(chan struct{}, 1), gates: map[string]chan struct{}{}, entered: map[string]int{},
		prepared: map[string]int{}, outcomes: map[string][]twophase.Outcome{}, at: map[string]time.Time{}, payloads: map[string]string{}}
}

func (r *rec) touch() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// gate makes Prepare of tx wait; the returned func releases it.
func (r *rec) gate(tx string) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	r.gates[tx] = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (r *rec) Prepare(ctx context.Context, tx twophase.Tx) (bool, error) {
	r.mu.Lock()
	r.entered[tx.ID]++
	gate := r.gates[tx.ID]
	vote := r.vote
	r.mu.Unlock()
	r.touch()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	r.mu.Lock()
	r.prepared[tx.ID]++
	r.mu.Unlock()
	r.touch()
	if vote == nil {
		return true, nil
	}
	return vote(tx)
}

func (r *rec) Commit(_ context.Context, tx twophase.Tx) error {
	return r.record(tx, twophase.Outcome{Committed: true})
}

func (r *rec) Abort(_ context.Context, tx twophase.Tx, reason string) error {
	return r.record(tx, twophase.Outcome{Reason: reason})
}

func (r *rec) record(tx twophase.Tx, o twophase.Outcome) error {
	r.mu.Lock()
	r.calls++
	if r.failing > 0 {
		r.failing--
		r.mu.Unlock()
		r.touch()
		return errors.New("handler failed")
	}
	if len(r.outcomes[tx.ID]) == 0 {
		r.at[tx.ID] = time.Now()
	}
	r.outcomes[tx.ID] = append(r.outcomes[tx.ID], o)
	r.payloads[tx.ID] = string(tx.Payload)
	r.mu.Unlock()
	r.touch()
	return nil
}

// waitFor waits until cond (called with r.mu held) holds.
func (r *rec) waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// outcome waits for the first outcome r saw for tx.
func (r *rec) outcome(t *testing.T, ctx context.Context, tx string) twophase.Outcome {
	t.Helper()
	r.waitFor(t, ctx, "an outcome of "+tx, func() bool { return len(r.outcomes[tx]) > 0 })
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[tx][0]
}

// serving is a participant run by Serve on a goroutine of the test.
type serving struct {
	p    *twophase.Participant
	stop func() error // cancels Serve, waits for it, closes p; Serve's error
}

func serve(t *testing.T, conn zk.Conn, id string, h twophase.Handler) *serving {
	t.Helper()
	p, err := twophase.NewParticipant(conn, root, id, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	var once sync.Once
	var serr error
	s := &serving{p: p, stop: func() error {
		once.Do(func() {
			cancel()
			serr = <-done
			p.Close()
		})
		return serr
	}}
	t.Cleanup(func() { s.stop() })
	waitExists(t, conn, root+"/participants/"+id)
	return s
}

func newCoordinator(t *testing.T, conn zk.Conn, opts ...twophase.Option) *twophase.Coordinator {
	t.Helper()
	c, err := twophase.NewCoordinator(conn, root, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitExists waits until path exists.
func waitExists(t *testing.T, c zk.Conn, path string) {
	t.Helper()
	waitNode(t, c, path, true)
}

// waitGone waits until path does not exist.
func waitGone(t *testing.T, c zk.Conn, path string) {
	t.Helper()
	waitNode(t, c, path, false)
}

func waitNode(t *testing.T, c zk.Conn, path string, want bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		_, ok, w, err := c.ExistsW(ctx, path)
		if err != nil && !errors.Is(err, zk.ErrConnectionLoss) {
			t.Fatalf("exists %s: %v", path, err)
		}
		if err == nil && ok == want {
			return
		}
		if err == nil {
			select {
			case <-w:
				continue
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s to exist=%v: %v", path, want, ctx.Err())
		}
	}
}

type proposal struct {
	out twophase.Outcome
	err error
}

func proposeAsync(ctx context.Context, c *twophase.Coordinator, tx string, payload []byte, ps ...string) <-chan proposal {
	ch := make(chan proposal, 1)
	go func() {
		out, err := c.Propose(ctx, tx, payload, ps)
		ch <- proposal{out, err}
	}()
	return ch
}

func recv(t *testing.T, ctx context.Context, ch <-chan proposal) proposal {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-ctx.Done():
		t.Fatalf("waiting for Propose: %v", ctx.Err())
		return proposal{}
	}
}

func voteNo(reason string) func(twophase.Tx) (bool, error) {
	return func(twophase.Tx) (bool, error) { return false, fmt.Errorf("%s", reason) }
}

// connect opens a session on tg and makes two plain round trips on it
// before the test sets any watch: go-zookeeper v1.0.4 reads its last zxid
// for setWatches, right after a handshake, without synchronising with its
// receive loop (see adapters/zk/resync.go); a watch answered before its
// connection loop got there makes the race detector report it. The round
// trips give the loop the time to get past that point.
func connect(t *testing.T, tg testkit.Target) zk.Conn {
	t.Helper()
	c := tg.Connect(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for range 2 {
		if err := c.Sync(ctx, "/"); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	return c
}
