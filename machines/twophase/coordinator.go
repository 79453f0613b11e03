package twophase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// The states on the package's lifecycle events, a transaction's at a
// participant: OFFER once its handler prepared (its vote is being
// offered), DETERMINE once it voted (the decision is awaited), READY once
// the decision was handled; a coordinator's events say READY (decided).
const (
	statePrepared = events.StateOffer
	stateVoted    = events.StateDetermine
	stateDecided  = events.StateReady
)

// ErrAborted is the Err of an ABORTED event; its text ends with the reason.
var ErrAborted = errors.New("twophase: aborted")

// Coordinator proposes transactions under a root path. Its methods are
// safe for concurrent use. It is an actor: a pure machine run by a
// runtime.Shell, which also deletes decided transactions after the
// retention period.
type Coordinator struct {
	conn    zk.Conn
	p       paths
	o       options
	tel     *runtime.Telemetry
	rq      zk.Conn             // conn, its requests traced
	txs     metric.Int64Counter // zkrecipes.twophase.transactions
	shell   *runtime.Shell[input, command]
	watches map[string]chan struct{} // per transaction collected, closed when its watches end (see watching)
}

// NewCoordinator returns a Coordinator of the transactions under root.
// Nothing is sent to the server but a look for decided transactions left
// by another coordinator. Errors: zk.ErrInvalidPath for a bad root,
// ErrInvalidOption for a bad option, ErrClosed for a nil connection.
func NewCoordinator(conn zk.Conn, root string, opts ...Option) (*Coordinator, error) {
	if err := validRoot(root); err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, ErrClosed
	}
	conn, o, err := newOptions(conn, opts)
	if err != nil {
		return nil, err
	}
	if !o.idSet {
		o.id = "coordinator"
	}
	switch {
	case o.voteTimeout <= 0:
		return nil, fmt.Errorf("%w: vote timeout %v: it must be positive", ErrInvalidOption, o.voteTimeout)
	case o.retention <= 0:
		return nil, fmt.Errorf("%w: retention %v: it must be positive", ErrInvalidOption, o.retention)
	case o.id == "":
		return nil, fmt.Errorf("%w: empty coordinator id", ErrInvalidOption)
	}
	m, err := newCoordMachine(coordConfig{Root: root, VoteTimeout: o.voteTimeout, Retention: o.retention, SessionID: conn.SessionID()})
	if err != nil {
		return nil, err
	}
	sp := spec(conn, root, o.id, o)
	c := &Coordinator{conn: conn, p: paths{root}, o: o, tel: sp.Telemetry, rq: runtime.TraceConn(conn, sp.Telemetry, errorType)}
	c.watches = make(map[string]chan struct{})
	c.txs, err = sp.Telemetry.Meter().Int64Counter("zkrecipes.twophase.transactions", metric.WithUnit("{transaction}"),
		metric.WithDescription("Transactions decided by a coordinator, by outcome (committed, aborted) and abort reason."))
	if err != nil {
		otel.Handle(err) // a no-op counter then
	}
	sp.Exec = c.exec
	c.shell = runtime.Run(conn, m, sp)
	return c, nil
}

// Path is the root path of the coordinator's transactions.
func (c *Coordinator) Path() string { return c.p.root }

// ID is the coordinator's id (WithID).
func (c *Coordinator) ID() string { return c.o.id }

// State is the coordinator's state: START while no Propose is in
// progress, DETERMINE while one is, STOP once closed.
func (c *Coordinator) State() events.State { return c.shell.State() }

// Subscribe returns a subscription to the coordinator's events: START,
// then COMMITTED or ABORTED (the reason in Err) once per transaction it
// decided or saw decided.
func (c *Coordinator) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return c.shell.Subscribe(opts...)
}

// Close stops the handle: Proposes in flight return ErrClosed and their
// transactions are decided abort (waiting at most WithCloseTimeout: then
// ErrCleanupPending, and our nodes of them go when the connection's
// janitor deletes them or our session ends, which aborts them too);
// decided transactions not yet deleted stay. Later calls return the first
// one's result.
func (c *Coordinator) Close() error { return c.shell.Close() }

// Propose runs transaction txID with payload on participants and returns
// its outcome: it creates the transaction, waits for every vote (at most
// the vote timeout), and decides. Errors, before anything is sent:
// ErrInvalidID, ErrNoParticipants, ErrClosed; then ErrUnknownParticipant
// when a participant is not registered, ErrTxExists when txID is taken.
// When ctx ends before a decision, Propose tries to decide abort (for at
// most 5 s) and returns ctx.Err() (with the outcome, if one was read).
func (c *Coordinator) Propose(ctx context.Context, txID string, payload []byte, participants []string) (Outcome, error) {
	if err := validID("transaction", txID); err != nil {
		return Outcome{}, err
	}
	if len(participants) == 0 {
		return Outcome{}, ErrNoParticipants
	}
	seen := make(map[string]bool, len(participants))
	for _, id := range participants {
		if err := validID("participant", id); err != nil {
			return Outcome{}, err
		}
		if seen[id] {
			return Outcome{}, fmt.Errorf("%w: participant %q listed twice", ErrInvalidID, id)
		}
		seen[id] = true
	}
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	nonce := uuid.NewString()
	data, err := json.Marshal(txData{Nonce: nonce, Payload: payload, Participants: participants})
	if err != nil {
		return Outcome{}, fmt.Errorf("twophase: %w", err)
	}
	ctx, span := c.tel.Start(ctx, "propose", trace.SpanKindInternal,
		AttrTx.String(txID), AttrParticipants.Int(len(participants)))
	defer span.End()
	out, err := c.propose(ctx, txID, func(req uint64) input {
		return proposeCall{Req: req, Tx: txID, Data: data, Nonce: nonce, Participants: participants}
	})
	if err == nil || out != (Outcome{}) {
		span.SetAttributes(AttrCommitted.Bool(out.Committed))
	}
	runtime.Fail(span, err, errorType(err))
	return out, err
}

// propose makes Propose's three calls, each in its span: the create
// (the propose span's), the votes' collection ("prepare") and the
// decision ("decide").
func (c *Coordinator) propose(ctx context.Context, txID string, create func(uint64) input) (Outcome, error) {
	_, err := c.shell.Do(ctx, create)
	if err == nil {
		pctx, span := c.tel.Start(ctx, "prepare", trace.SpanKindInternal, AttrTx.String(txID))
		_, err = c.shell.Do(pctx, func(req uint64) input { return collectCall{Req: req, Tx: txID} })
		span.End()
	}
	if err == nil {
		dctx, span := c.tel.Start(ctx, "decide", trace.SpanKindInternal, AttrTx.String(txID))
		var a runtime.Answer
		a, err = c.shell.Do(dctx, func(req uint64) input { return decideCall{Req: req, Tx: txID} })
		out, _ := a.Value.(Outcome)
		if err == nil {
			span.SetAttributes(AttrCommitted.Bool(out.Committed))
		}
		runtime.Fail(span, err, errorType(err))
		span.End()
		if err == nil {
			return out, nil
		}
	}
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return Outcome{}, err
	}
	// The caller gave up before a decision: abort, on a ctx of our own.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	a, _ := c.shell.Do(actx, func(req uint64) input { return abandonCall{Req: req, Tx: txID} })
	out, _ := a.Value.(Outcome)
	return out, ctx.Err()
}

// exec makes one command's requests off the actor and posts their
// replies (and a watch's event) back as inputs. The Propose's requests
// are made in CLIENT spans under its calls'; the janitor's (expire,
// sweep, dropCoord) are roots.
func (c *Coordinator) exec(sh *runtime.Shell[input, command], cmd command, op runtime.Op) {
	conn, ps, do := c.conn, c.p, expecting(op)
	switch cmd := cmd.(type) {
	case create:
		sh.Go(func(ctx context.Context) (input, bool) {
			return done{What: "created", ref: cmd.ref, Err: c.create(ctx, do, cmd)}, true
		})
	case watchVotes:
		until := c.watching(cmd.Tx)
		sh.Go(func(ctx context.Context) (input, bool) {
			r := listed{What: "votes", ref: cmd.ref}
			var w <-chan zk.WatchEvent
			r.Err = do(ctx, "children", func(ctx context.Context) (err error) {
				r.Kids, _, w, err = conn.ChildrenW(ctx, ps.votes(cmd.Tx))
				return err
			})
			return watch(ctx, until, sh, r, r.Err, w, fired{What: "votes", ref: cmd.ref})
		})
	case expire:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := expired{ref: cmd.ref}
			if r.Waiting, r.Err = c.unhandled(ctx, cmd.Tx, cmd.Participants); r.Err == nil && !r.Waiting {
				r.Err = deleteTx(ctx, c.conn, ps, cmd.Tx)
			}
			return r, true
		})
	case dropCoord:
		c.unwatch(cmd.Tx)
		kv := []attribute.KeyValue{runtime.AttrRecipe.String("twophase"), runtime.AttrOutcome.String("committed")}
		if !cmd.Outcome.Committed {
			kv = []attribute.KeyValue{runtime.AttrRecipe.String("twophase"), runtime.AttrOutcome.String("aborted"), AttrReason.String(reasonClass(cmd.Outcome.Reason))}
		}
		c.txs.Add(context.Background(), 1, metric.WithAttributes(kv...))
		sh.Go(func(ctx context.Context) (input, bool) {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			// On failure, our session's end deletes it, or the
			// transaction's deletion does.
			_ = c.rq.Delete(dctx, ps.coordinator(cmd.Tx), zk.AnyVersion)
			return coordDropped{ref: cmd.ref}, true
		})
	case sweep:
		sh.Go(func(ctx context.Context) (input, bool) { return swept{ref: cmd.ref, Due: c.sweep(ctx)}, true })
	case makeDecision:
		c.unwatch(cmd.Tx)
		execShared(sh, conn, ps, do, nil, cmd)
	case watchCoord:
		execShared(sh, conn, ps, do, c.watching(cmd.Tx), cmd)
	case readDecision:
		execShared(sh, conn, ps, do, c.watching(cmd.Tx), cmd)
	default:
		execShared(sh, conn, ps, do, nil, cmd)
	}
}

// watching is closed when the collection of tx's votes ends (unwatch):
// a watch left on a transaction it decided fires only when the
// transaction is deleted, and its goroutine would wait till then. Both
// run on the actor, in the order of the machine's commands.
func (c *Coordinator) watching(tx string) <-chan struct{} {
	if c.watches[tx] == nil {
		c.watches[tx] = make(chan struct{})
	}
	return c.watches[tx]
}

func (c *Coordinator) unwatch(tx string) {
	if w := c.watches[tx]; w != nil {
		close(w)
		delete(c.watches, tx)
	}
}

// create makes the transaction, its coordinator node, its votes directory
// and the participants' inbox entries, in one multi.
func (c *Coordinator) create(ctx context.Context, do doFunc, cmd create) error {
	tx, participants := cmd.Tx, cmd.Participants
	ops := []zk.Op{
		&zk.CreateOp{Path: c.p.tx(tx), Data: cmd.Data, Mode: zk.ModePersistent},
		&zk.CreateOp{Path: c.p.coordinator(tx), Mode: zk.ModeEphemeral},
		&zk.CreateOp{Path: c.p.votes(tx), Mode: zk.ModePersistent},
	}
	for _, id := range participants {
		ops = append(ops, &zk.CreateOp{Path: c.p.inboxEntry(id, tx), Mode: zk.ModePersistent})
	}
	// Every participant must be registered: checked in the same multi, so
	// that the check costs no round trip and nothing is created without it.
	for _, id := range participants {
		ops = append(ops, &zk.CheckOp{Path: c.p.participant(id), Version: zk.AnyVersion})
	}
	var b backoff
	ensured, checks := false, 0
	for {
		err := do(ctx, "multi", func(ctx context.Context) error { _, err := c.conn.Multi(ctx, ops...); return err })
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode) && ensured:
			// A participant is not registered, or was not a moment ago.
			if uerr := c.unknown(ctx, do, participants); uerr != nil {
				return uerr
			}
			if checks++; checks == 3 {
				return fmt.Errorf("twophase: creating transaction %q: %w", tx, err)
			}
			continue
		case errors.Is(err, zk.ErrNoNode) && !ensured:
			// A registered participant has its inbox already; the
			// transactions' directory is made by the first Propose.
			err := do(ctx, "create", func(ctx context.Context) error {
				err := zk.EnsurePath(ctx, c.conn, c.p.txs(), zk.ModePersistent)
				for _, id := range participants {
					if err == nil {
						err = zk.EnsurePath(ctx, c.conn, c.p.inbox(id), zk.ModePersistent)
					}
				}
				return err
			})
			if err == nil {
				ensured = true
				continue
			}
			if !retryable(err) {
				return fmt.Errorf("twophase: %w", err)
			}
		case errors.Is(err, zk.ErrNodeExists):
			// Ours, applied before a lost reply?
			var got []byte
			if do(ctx, "get", func(ctx context.Context) (err error) { got, _, err = c.conn.Get(ctx, c.p.tx(tx)); return err }) == nil {
				if d, derr := decodeTx(got); derr == nil && d.Nonce == cmd.Nonce {
					return nil
				}
			}
			return fmt.Errorf("%w: %q", ErrTxExists, tx)
		case !retryable(err):
			return fmt.Errorf("twophase: creating transaction %q: %w", tx, err)
		}
		if err := wait(ctx, b.next()); err != nil {
			return err
		}
	}
}

// unknown names a participant that is not registered (ErrUnknownParticipant),
// or returns nil when every one is.
func (c *Coordinator) unknown(ctx context.Context, do doFunc, participants []string) error {
	for _, id := range participants {
		var ok bool
		err := do(ctx, "exists", func(ctx context.Context) (err error) {
			_, ok, err = c.conn.Exists(ctx, c.p.participant(id))
			return err
		})
		if err != nil {
			return fmt.Errorf("twophase: checking participant %q: %w", id, err)
		}
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownParticipant, id)
		}
	}
	return nil
}

// reasonClass is an abort's reason for a metric: one of the Reason
// constants, or "vote_no" for a participant's (whose text is its own).
func reasonClass(r string) string {
	switch r {
	case ReasonCancelled, ReasonVoteTimeout, ReasonCoordinatorGone:
		return r
	}
	return "vote_no"
}

// sweep finds the decided transactions already under the root, left by a
// coordinator that closed or crashed before their retention was over: each
// is deleted once its decision is that old (by the server's clock). Not
// decided ones are another coordinator's, or will be decided by their
// participants. With no connection now, it finds nothing.
func (c *Coordinator) sweep(ctx context.Context) []dueTx {
	txs, _, err := c.rq.Children(ctx, c.p.txs())
	if err != nil {
		return nil
	}
	var due []dueTx
	for _, tx := range txs {
		if st, ok, err := c.rq.Exists(ctx, c.p.decision(tx)); err == nil && ok {
			due = append(due, dueTx{Tx: tx, Delay: time.Until(time.UnixMilli(st.Ctime).Add(c.o.retention))})
		}
	}
	return due
}

// unhandled reports whether a participant of tx (nil: read from its node)
// still has its inbox entry: it has not had its Commit or Abort call yet
// (it is down, or slow). The entries are looked at together.
func (c *Coordinator) unhandled(ctx context.Context, tx string, ps []string) (bool, error) {
	if ps == nil {
		data, _, err := c.rq.Get(ctx, c.p.tx(tx))
		if errors.Is(err, zk.ErrNoNode) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		d, err := decodeTx(data)
		if err != nil {
			return false, nil // not ours to keep
		}
		ps = d.Participants
	}
	found, errs := make([]bool, len(ps)), make([]error, len(ps))
	var wg sync.WaitGroup
	for i, id := range ps {
		wg.Go(func() { _, found[i], errs[i] = c.rq.Exists(ctx, c.p.inboxEntry(id, tx)) })
	}
	wg.Wait()
	return slices.Contains(found, true), errors.Join(errs...)
}

// decide creates the decision node with want, or reads the decision made
// first; either way every reader gets the same one. A commit is made only
// while the coordinator's node is there, in one multi with a check of it:
// a coordinator whose session has ended (its node went with it) may have
// read every vote just before, on its new session, but the participants
// may be aborting for the session's end, and it does not race them; its
// commit fails, and it aborts too.
func decide(ctx context.Context, conn zk.Conn, p paths, txID string, want Outcome) (Outcome, error) {
	var b backoff
	for {
		var err error
		switch {
		case want.Committed:
			_, err = conn.Multi(ctx, &zk.CheckOp{Path: p.coordinator(txID), Version: zk.AnyVersion},
				&zk.CreateOp{Path: p.decision(txID), Data: encodeDecision(want), Mode: zk.ModePersistent})
			if errors.Is(err, zk.ErrNoNode) { // the coordinator's node is gone (or the transaction)
				want = Outcome{Reason: ReasonCoordinatorGone}
				continue
			}
		case want.Reason != "":
			_, err = conn.Create(ctx, p.decision(txID), encodeDecision(want), zk.ModePersistent)
		}
		if err == nil && want != (Outcome{}) {
			return want, nil
		}
		if err == nil || errors.Is(err, zk.ErrNodeExists) || retryable(err) {
			data, _, gerr := conn.Get(ctx, p.decision(txID))
			if gerr == nil {
				return decodeDecision(data), nil
			}
			if !retryable(gerr) && !errors.Is(gerr, zk.ErrNoNode) {
				return Outcome{}, fmt.Errorf("twophase: reading the decision of %q: %w", txID, gerr)
			}
			if want == (Outcome{}) && errors.Is(gerr, zk.ErrNoNode) {
				want = Outcome{Reason: ReasonCoordinatorGone} // it was there: only deletion removes it
			}
		} else {
			return Outcome{}, fmt.Errorf("twophase: deciding %q: %w", txID, err)
		}
		if err := wait(ctx, b.next()); err != nil {
			return Outcome{}, err
		}
	}
}

// retryable reports whether a request may succeed when made again.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionLoss) || errors.Is(err, zk.ErrSessionExpired)
}

// wait waits d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
