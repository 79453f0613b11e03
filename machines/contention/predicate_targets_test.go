package contention_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const (
	readM  = "__READ__"
	writeM = "__WRIT__"
)

var errs = contention.Errors{
	SessionLost:    errors.New("test: session lost"),
	Suspended:      errors.New("test: suspended"),
	NodeDeleted:    errors.New("test: node deleted"),
	NotHeld:        errors.New("test: not held"),
	Closed:         errors.New("test: closed"),
	Released:       errors.New("test: released"),
	CleanupPending: errors.New("test: cleanup pending"),
	InvalidOption:  errors.New("test: invalid option"),
}

// contender runs a contention machine with predicate p on c, closed at
// the end of the test.
type contender struct {
	in  *contention.Instance
	sub *events.Subscription
}

func newContender(t *testing.T, c zk.Conn, dir string, markers []string, p contention.Predicate) *contender {
	t.Helper()
	in, err := contention.Open(c, contention.Config{Dir: dir, Markers: markers, Predicate: p, Errors: errs, NewID: uuid.NewString},
		contention.DefaultOptions("predicate", "github.com/zkrecipes/zkrecipes/machines/contention", "test"))
	if err != nil {
		t.Fatal(err)
	}
	sub := in.Subscribe()
	t.Cleanup(func() { sub.Close(); in.Close() })
	return &contender{in: in, sub: sub}
}

type result struct {
	g   contention.Grant
	err error
}

// acquire asks for a hold with marker and answers on the channel.
func (c *contender) acquire(ctx context.Context, marker string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := c.in.Do(ctx, func(req uint64) contention.Input { return contention.Acquire{Req: req, Marker: marker} })
		if err == nil && !r.Granted {
			err = r.Err
		}
		ch <- result{r.Grant, err}
	}()
	return ch
}

// holds waits for ch's grant.
func holds(t *testing.T, what string, ch <-chan result) contention.Grant {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.g
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no grant within 30s", what)
	}
	return contention.Grant{}
}

// waits checks that c waits (its READY_START came) and has no grant.
func (c *contender) waits(t *testing.T, what string, ch <-chan result) {
	t.Helper()
	testkit.WaitEvent(t, c.sub, events.ReadyStart)
	select {
	case r := <-ch:
		t.Fatalf("%s: want it to wait, got %+v", what, r)
	default:
	}
}

func (c *contender) release(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := c.in.Do(ctx, func(req uint64) contention.Input { return contention.Release{Req: req} }); err != nil {
		t.Fatal(err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Read/write on each target: readers hold together, a writer waits for
// them, a reader behind that writer waits for it (not for the readers),
// and holds when the writer releases.
func TestReadWriteOnEachTarget(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		const dir = "/preds/rw"
		p, markers := contention.ReadWrite(readM), []string{writeM, readM}
		r1 := newContender(t, tg.Connect(t), dir, markers, p)
		r2 := newContender(t, tg.Connect(t), dir, markers, p)
		w := newContender(t, tg.Connect(t), dir, markers, p)
		r3 := newContender(t, tg.Connect(t), dir, markers, p)

		holds(t, "first reader", r1.acquire(ctx, readM))
		holds(t, "a reader behind a reader", r2.acquire(ctx, readM))
		wch := w.acquire(ctx, writeM)
		w.waits(t, "a writer behind readers", wch)
		r3ch := r3.acquire(ctx, readM)
		r3.waits(t, "a reader behind a writer", r3ch)

		r1.release(t, ctx)
		r2.release(t, ctx)
		holds(t, "the writer once the readers left", wch)
		select {
		case r := <-r3ch:
			t.Fatalf("a reader held beside the writer: %+v", r)
		default:
		}
		w.release(t, ctx)
		holds(t, "the reader once the writer left", r3ch)
	})
}

// A writer that downgrades makes a reader at its own sequence (a plain
// create of the reader's name), below the nodes made after it. A writer
// waiting behind a reader that waited for that writer finds the writer
// gone when it checks what it saw below: it must list again, find the
// reader, and wait for it. Seen on each target: its watch on the reader
// is the proof that it looked; before, it held beside the reader.
func TestReadWriteWriterSeesADowngradedReader(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		const dir = "/preds/downgrade"
		p, markers := contention.ReadWrite(readM), []string{writeM, readM}
		wc, xc := tg.Connect(t), tg.Connect(t)
		w := newContender(t, wc, dir, markers, p)
		r := newContender(t, tg.Connect(t), dir, markers, p)
		x := newContender(t, xc, dir, markers, p)

		wg := holds(t, "the first writer", w.acquire(ctx, writeM))
		rch := r.acquire(ctx, readM)
		r.waits(t, "a reader behind the writer", rch)
		xch := x.acquire(ctx, writeM)
		x.waits(t, "a writer behind the reader", xch)

		// The downgrade: the reader at the writer's sequence, then the
		// writer's release.
		down := strings.Replace(wg.Node, writeM, readM, 1)
		if _, err := wc.Create(ctx, down, nil, zk.ModeEphemeral); err != nil {
			t.Fatal(err)
		}
		w.release(t, ctx)
		holds(t, "the reader once no writer is below it", rch)

		looked := tg.HoldNextReply(t, xc, testkit.OpChildren, down)
		defer looked.Release()
		r.release(t, ctx)
		select {
		case <-looked.Fired():
			looked.Release()
		case res := <-xch:
			t.Fatalf("the writer held beside the downgraded reader: %+v", res)
		case <-ctx.Done():
			t.Fatal("the writer never watched the downgraded reader")
		}
		select {
		case res := <-xch:
			t.Fatalf("the writer held beside the downgraded reader: %+v", res)
		default:
		}
		if err := wc.Delete(ctx, down, -1); err != nil {
			t.Fatal(err)
		}
		holds(t, "the writer once the downgraded reader left", xch)
	})
}

// Leases(2) on each target: two hold together, the third waits, and holds
// when one of the two below it releases (the first, so that it is not
// just the node right below).
func TestLeasesOnEachTarget(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		const dir = "/preds/leases"
		p, markers := contention.Leases(2), []string{"lease-"}
		a := newContender(t, tg.Connect(t), dir, markers, p)
		b := newContender(t, tg.Connect(t), dir, markers, p)
		c := newContender(t, tg.Connect(t), dir, markers, p)

		holds(t, "the first", a.acquire(ctx, ""))
		holds(t, "the second", b.acquire(ctx, ""))
		cch := c.acquire(ctx, "")
		c.waits(t, "the third", cch)
		a.release(t, ctx)
		holds(t, "the third once one of two left", cch)
	})
}

// A Release that names a grant's term leaves a later term alone: a grant
// released after its term ended (and another began) is NotHeld, and the
// later holder keeps its hold (election.Term.Release racing a new
// Campaign, lock.Grant.Release of an old grant).
func TestReleaseOfAnEndedTermLeavesTheNextAlone(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		c := newContender(t, tg.Connect(t), "/preds/term", []string{writeM}, contention.Exclusive())
		old := holds(t, "first term", c.acquire(ctx, writeM))
		c.release(t, ctx)
		now := holds(t, "second term", c.acquire(ctx, writeM))
		_, err := c.in.Do(ctx, func(req uint64) contention.Input { return contention.Release{Req: req, All: true, Term: old.Term} })
		if !errors.Is(err, errs.NotHeld) {
			t.Fatalf("release of the ended term %d: %v, want NotHeld", old.Term, err)
		}
		if s := c.in.State(); s != events.StateLeader {
			t.Fatalf("after releasing the ended term the machine is %s, want still LEADER", s)
		}
		if _, err := c.in.Do(ctx, func(req uint64) contention.Input { return contention.Release{Req: req, Term: now.Term} }); err != nil {
			t.Fatalf("release of the current term: %v", err)
		}
	})
}
