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
// safe for concurrent use; each Propose runs on its caller's goroutine, and
// the handle's one goroutine deletes decided transactions after the
// retention period.
type Coordinator struct {
	conn zk.Conn
	p    paths
	o    options
	tel  *runtime.Telemetry
	rq   zk.Conn             // conn, its requests traced
	txs  metric.Int64Counter // zkrecipes.twophase.transactions
	bus  *events.Bus

	life   context.Context // cancelled by Close
	cancel context.CancelFunc
	box    runtime.Mailbox[expiry]
	done   chan struct{} // the janitor ended

	mu        sync.Mutex
	closed    bool
	proposing sync.WaitGroup
	closeOnce sync.Once
}

// expiry is a decided transaction and when it may be deleted.
type expiry struct {
	tx string
	at time.Time
	// undecided: a transaction its Propose gave up on without knowing a
	// decision; it is decided abort (or the decision made meanwhile is
	// read) before its retention starts.
	undecided bool
	// participants, when the coordinator knows them (nil: read from the
	// transaction's node, for one a sweep found).
	participants []string
}

// NewCoordinator returns a Coordinator of the transactions under root.
// Nothing is sent to the server. Errors: zk.ErrInvalidPath for a bad root,
// ErrInvalidOption for a bad option, ErrClosed for a nil connection.
func NewCoordinator(conn zk.Conn, root string, opts ...Option) (*Coordinator, error) {
	if err := validRoot(root); err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, ErrClosed
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if !o.idSet {
		o.id = "coordinator"
	}
	if o.voteTimeout <= 0 {
		return nil, fmt.Errorf("%w: vote timeout %v: it must be positive", ErrInvalidOption, o.voteTimeout)
	}
	if o.retention <= 0 {
		return nil, fmt.Errorf("%w: retention %v: it must be positive", ErrInvalidOption, o.retention)
	}
	if o.id == "" {
		return nil, fmt.Errorf("%w: empty coordinator id", ErrInvalidOption)
	}
	tel := runtime.NewTelemetry(conn, runtime.TelemetryConfig{TracerProvider: o.tracerProvider, MeterProvider: o.meterProvider,
		Scope: ScopeName, Version: Version, Recipe: "twophase", Path: root, Instance: o.id})
	c := &Coordinator{conn: conn, p: paths{root}, o: o, tel: tel, rq: runtime.TraceConn(conn, tel, errorType), bus: events.NewBus(),
		done: make(chan struct{})}
	c.txs, err = tel.Meter().Int64Counter("zkrecipes.twophase.transactions", metric.WithUnit("{transaction}"),
		metric.WithDescription("Transactions decided by a coordinator, by outcome (committed, aborted) and abort reason."))
	if err != nil {
		otel.Handle(err) // a no-op counter then
	}
	c.life, c.cancel = context.WithCancel(context.Background())
	go c.janitor()
	return c, nil
}

// Path is the root path of the coordinator's transactions.
func (c *Coordinator) Path() string { return c.p.root }

// ID is the coordinator's id (WithID).
func (c *Coordinator) ID() string { return c.o.id }

// Subscribe returns a subscription to the coordinator's events: COMMITTED
// or ABORTED (the reason in Err) once per transaction it decided or saw
// decided.
func (c *Coordinator) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return c.bus.Subscribe(opts...)
}

// Close stops the handle: Proposes in flight try to decide abort (as on
// cancel) and return ErrClosed; decided transactions not yet deleted stay.
// Later calls return ErrClosed.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.cancel()
		c.proposing.Wait()
		<-c.done
		c.bus.Close()
	})
	return nil
}

func (c *Coordinator) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.proposing.Add(1)
	return true
}

// Propose runs transaction txID with payload on participants and returns
// its outcome: it creates the transaction, waits for every vote (at most
// the vote timeout), and decides. Errors, before anything is sent:
// ErrInvalidID, ErrNoParticipants, ErrClosed; then ErrUnknownParticipant
// when a participant is not registered, ErrTxExists when txID is taken.
// When ctx ends before a decision, Propose tries to decide abort and
// returns ctx.Err() (with the outcome, if one was read).
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
	if !c.enter() {
		return Outcome{}, ErrClosed
	}
	defer c.proposing.Done()
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()

	ctx, span := c.tel.Start(ctx, "propose", trace.SpanKindInternal,
		AttrTx.String(txID), AttrParticipants.Int(len(participants)))
	defer span.End()
	out, err := c.propose(ctx, txID, payload, participants, span)
	if err != nil {
		if c.life.Err() != nil && !errors.Is(err, ErrUnknownParticipant) && !errors.Is(err, ErrTxExists) {
			err = ErrClosed
		}
		runtime.Fail(span, err, errorType(err))
	}
	return out, err
}

func (c *Coordinator) propose(ctx context.Context, txID string, payload []byte, participants []string, span trace.Span) (Outcome, error) {
	if err := c.create(ctx, txID, payload, participants); err != nil {
		if !errors.Is(err, ErrUnknownParticipant) && !errors.Is(err, ErrTxExists) {
			// The transaction may have been made (a reply lost, then ctx
			// ended): the janitor decides it and deletes it in time.
			c.box.Put(expiry{tx: txID, at: time.Now(), undecided: true, participants: participants})
		}
		return Outcome{}, err
	}
	out, err := c.collect(ctx, txID, participants)
	if err != nil {
		// Cancelled or closed before a decision: abort, on a ctx of our own.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if o, derr := decide(actx, c.rq, c.p, txID, Outcome{Reason: ReasonCancelled}); derr == nil {
			c.finish(actx, txID, participants, o, span)
			return o, err
		}
		c.box.Put(expiry{tx: txID, at: time.Now(), undecided: true, participants: participants})
		return Outcome{}, err
	}
	c.finish(ctx, txID, participants, out, span)
	return out, nil
}

// create makes the transaction, its coordinator node, its votes directory
// and the participants' inbox entries, in one multi.
func (c *Coordinator) create(ctx context.Context, txID string, payload []byte, participants []string) error {
	nonce := uuid.NewString()
	data, err := json.Marshal(txData{Nonce: nonce, Payload: payload, Participants: participants})
	if err != nil {
		return fmt.Errorf("twophase: %w", err)
	}
	ops := []zk.Op{
		&zk.CreateOp{Path: c.p.tx(txID), Data: data, Mode: zk.ModePersistent},
		&zk.CreateOp{Path: c.p.coordinator(txID), Mode: zk.ModeEphemeral},
		&zk.CreateOp{Path: c.p.votes(txID), Mode: zk.ModePersistent},
	}
	for _, id := range participants {
		ops = append(ops, &zk.CreateOp{Path: c.p.inboxEntry(id, txID), Mode: zk.ModePersistent})
	}
	// Every participant must be registered: checked in the same multi, so
	// that the check costs no round trip and nothing is created without it.
	for _, id := range participants {
		ops = append(ops, &zk.CheckOp{Path: c.p.participant(id), Version: zk.AnyVersion})
	}
	var b backoff
	ensured, checks := false, 0
	for {
		mctx := ctx
		if !ensured {
			mctx = runtime.Expect(ctx, zk.ErrNoNode) // the first Propose makes the directories
		}
		_, err := c.rq.Multi(mctx, ops...)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode) && ensured:
			// A participant is not registered, or was not a moment ago.
			if uerr := c.unknown(ctx, participants); uerr != nil {
				return uerr
			}
			if checks++; checks == 3 {
				return fmt.Errorf("twophase: creating transaction %q: %w", txID, err)
			}
			continue
		case errors.Is(err, zk.ErrNoNode) && !ensured:
			// A registered participant has its inbox already; the
			// transactions' directory is made by the first Propose.
			ectx := runtime.Expect(ctx, zk.ErrNoNode, zk.ErrNodeExists)
			err := zk.EnsurePath(ectx, c.rq, c.p.txs(), zk.ModePersistent)
			for _, id := range participants {
				if err == nil {
					err = zk.EnsurePath(ectx, c.rq, c.p.inbox(id), zk.ModePersistent)
				}
			}
			if err == nil {
				ensured = true
				continue
			}
			if !retryable(err) {
				return fmt.Errorf("twophase: %w", err)
			}
		case errors.Is(err, zk.ErrNodeExists):
			// Ours, applied before a lost reply?
			if got, _, gerr := c.rq.Get(ctx, c.p.tx(txID)); gerr == nil {
				if d, derr := decodeTx(got); derr == nil && d.Nonce == nonce {
					return nil
				}
			}
			return fmt.Errorf("%w: %q", ErrTxExists, txID)
		case !retryable(err):
			return fmt.Errorf("twophase: creating transaction %q: %w", txID, err)
		}
		if err := wait(ctx, b.next()); err != nil {
			return err
		}
	}
}

// unknown names a participant that is not registered (ErrUnknownParticipant),
// or returns nil when every one is.
func (c *Coordinator) unknown(ctx context.Context, participants []string) error {
	for _, id := range participants {
		_, ok, err := c.rq.Exists(ctx, c.p.participant(id))
		if err != nil {
			return fmt.Errorf("twophase: checking participant %q: %w", id, err)
		}
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownParticipant, id)
		}
	}
	return nil
}

// collect waits for the votes and returns the decision: its own, or one
// someone else made.
func (c *Coordinator) collect(ctx context.Context, txID string, participants []string) (Outcome, error) {
	outer := ctx // the decision's span is the prepare span's sibling
	ctx, span := c.tel.Start(ctx, "prepare", trace.SpanKindInternal, AttrTx.String(txID))
	defer span.End()
	ctx = runtime.Expect(ctx, zk.ErrNoNode) // nodes not made yet, or gone: states, not failures
	timer := time.NewTimer(c.o.voteTimeout)
	defer timer.Stop()
	member := make(map[string]bool, len(participants))
	for _, id := range participants {
		member[id] = true
	}
	voted := make(map[string]bool, len(participants))
	var (
		decW, coordW, votesW <-chan zk.WatchEvent
		retry                <-chan time.Time
		b                    backoff
		ended                bool // a watch ended without a change: the session did
	)
	for {
		var want *Outcome
		if retry == nil {
			err := func() error {
				// The decision, our node and the votes, read at once.
				var (
					decOK, coordOK     bool
					decErr, coordErr   error
					kids               []string
					kidsErr            error
					wg                 sync.WaitGroup
					needDec, needCoord = decW == nil, coordW == nil
				)
				if ended {
					// Our node first, alone: gone with the session, the
					// outcome is known, and no watch is set on the new
					// session before go-zookeeper has re-sent its own (a
					// reply to one then would race with its read of the
					// last zxid: see adapters/zk, "A data race").
					ended = false
					if coordOK, coordW, coordErr = runtime.WatchDeletion(ctx, c.rq, c.p.coordinator(txID)); coordErr != nil || !coordOK {
						if coordErr == nil {
							want = &Outcome{Reason: ReasonCoordinatorGone}
						}
						return coordErr
					}
					needCoord = false
				}
				if needDec {
					wg.Go(func() { _, decOK, decW, decErr = c.rq.ExistsW(ctx, c.p.decision(txID)) })
				}
				if needCoord {
					wg.Go(func() { coordOK, coordW, coordErr = runtime.WatchDeletion(ctx, c.rq, c.p.coordinator(txID)) })
				}
				needVotes := votesW == nil
				if needVotes {
					kids, _, votesW, kidsErr = c.rq.ChildrenW(ctx, c.p.votes(txID))
				}
				wg.Wait()
				if err := errors.Join(decErr, coordErr, kidsErr); err != nil {
					return err
				}
				switch {
				case needDec && decOK:
					want = &Outcome{} // read by decide below
					return nil
				case needCoord && !coordOK:
					want = &Outcome{Reason: ReasonCoordinatorGone}
					return nil
				}
				if !needVotes {
					return nil
				}
				// The votes' names are all it takes: a no vote is made in
				// one multi with its abort decision, so when everyone has
				// voted and no decision was there, every vote is yes (and
				// the commit's create fails on an abort made since).
				for _, id := range kids {
					if member[id] {
						voted[id] = true
					}
				}
				if len(voted) == len(participants) {
					want = &Outcome{Committed: true}
				}
				return nil
			}()
			if err != nil {
				if ctx.Err() != nil {
					return Outcome{}, ctx.Err()
				}
				if !retryable(err) && !errors.Is(err, zk.ErrNoNode) {
					return Outcome{}, fmt.Errorf("twophase: %w", err)
				}
				decW, coordW, votesW = nil, nil, nil
				retry = time.After(b.next())
			} else {
				b.reset()
			}
		}
		if want != nil {
			span.End()
			return c.decide(outer, txID, *want)
		}
		var ev zk.WatchEvent
		select {
		case ev = <-decW:
			decW = nil
		case ev = <-coordW:
			coordW = nil
		case ev = <-votesW:
			votesW = nil
		case <-retry:
			retry = nil
		case <-timer.C:
			span.End()
			return c.decide(outer, txID, Outcome{Reason: ReasonVoteTimeout})
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		}
		if ev.Type == zk.EventNotWatching {
			decW, coordW, votesW = nil, nil, nil
			ended = true
		}
	}
}

// decide makes the decision want, or reads the one made first, in a span.
func (c *Coordinator) decide(ctx context.Context, txID string, want Outcome) (Outcome, error) {
	ctx, span := c.tel.Start(ctx, "decide", trace.SpanKindInternal, AttrTx.String(txID))
	defer span.End()
	// node_exists: decided first by another; no_node: not decided yet.
	out, err := decide(runtime.Expect(ctx, zk.ErrNodeExists, zk.ErrNoNode), c.rq, c.p, txID, want)
	if err == nil {
		span.SetAttributes(AttrCommitted.Bool(out.Committed))
	}
	runtime.Fail(span, err, errorType(err))
	return out, err
}

// finish ends a decided transaction: the outcome is published, its
// deletion is scheduled, and the coordinator node goes, after Propose
// returns: the decision is made, so the node tells no one anything more,
// and its delete, a write, would cost Propose a commit.
func (c *Coordinator) finish(ctx context.Context, txID string, participants []string, out Outcome, span trace.Span) {
	span.SetAttributes(AttrCommitted.Bool(out.Committed))
	kv := []attribute.KeyValue{runtime.AttrRecipe.String("twophase"), runtime.AttrOutcome.String("committed")}
	if !out.Committed {
		kv = []attribute.KeyValue{runtime.AttrRecipe.String("twophase"), runtime.AttrOutcome.String("aborted"), AttrReason.String(reasonClass(out.Reason))}
	}
	c.txs.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(kv...))
	ev := events.Event{Type: events.Committed, State: stateDecided}
	if !out.Committed {
		ev = events.Event{Type: events.Aborted, State: stateDecided, Err: fmt.Errorf("%w: %s", ErrAborted, out.Reason)}
	}
	publish(c.bus, c.conn, c.p.root, c.o.id, c.p.tx(txID), span.SpanContext(), ev)
	c.box.Put(expiry{tx: txID, at: time.Now().Add(c.o.retention), participants: participants})
	c.proposing.Add(1) // Propose holds one: Close waits for this too
	go func() {
		defer c.proposing.Done()
		dctx, cancel := context.WithTimeout(c.life, 5*time.Second)
		defer cancel()
		// On failure, our session's end deletes it, or the transaction's
		// deletion does.
		_ = c.rq.Delete(dctx, c.p.coordinator(txID), zk.AnyVersion)
	}()
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

// janitorWidth is how many due transactions the janitor works on at once.
const janitorWidth = 8

// expire does what is due for e: decides it (abort) if it was left
// undecided, then deletes it if every participant has had its call. It
// returns e rescheduled and true, or false when it is done with.
func (c *Coordinator) expire(e expiry, now time.Time) (expiry, bool) {
	if e.undecided {
		_, err := decide(c.life, c.rq, c.p, e.tx, Outcome{Reason: ReasonCancelled})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return e, false // never made, or deleted already
		case err != nil:
			e.at = now.Add(time.Second)
			return e, true
		}
		e.undecided, e.at = false, now.Add(c.o.retention)
		return e, true
	}
	switch waiting, err := c.unhandled(c.life, e); {
	case err != nil:
		e.at = now.Add(time.Second)
		return e, true
	case waiting:
		e.at = now.Add(c.o.retention) // a participant has not had its call yet
		return e, true
	}
	if err := deleteTx(c.life, c.conn, c.p, e.tx); err != nil {
		e.at = now.Add(time.Second)
		return e, true
	}
	return e, false
}

// sweep finds the decided transactions already under the root, left by a
// coordinator that closed or crashed before their retention was over: each
// is deleted once its decision is that old (by the server's clock). Not
// decided ones are another coordinator's, or will be decided by their
// participants. With no connection now, it finds nothing.
func (c *Coordinator) sweep() []expiry {
	txs, _, err := c.rq.Children(c.life, c.p.txs())
	if err != nil {
		return nil
	}
	var due []expiry
	for _, tx := range txs {
		if st, ok, err := c.rq.Exists(c.life, c.p.decision(tx)); err == nil && ok {
			due = append(due, expiry{tx: tx, at: time.UnixMilli(st.Ctime).Add(c.o.retention)})
		}
	}
	return due
}

// unhandled reports whether a participant of e's transaction still has
// its inbox entry: it has not had its Commit or Abort call yet (it is
// down, or slow). The entries are looked at together.
func (c *Coordinator) unhandled(ctx context.Context, e expiry) (bool, error) {
	ps := e.participants
	if ps == nil {
		data, _, err := c.rq.Get(ctx, c.p.tx(e.tx))
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
		wg.Go(func() { _, found[i], errs[i] = c.rq.Exists(ctx, c.p.inboxEntry(id, e.tx)) })
	}
	wg.Wait()
	return slices.Contains(found, true), errors.Join(errs...)
}

// janitor deletes decided transactions once their retention is over and
// every participant has had its call.
func (c *Coordinator) janitor() {
	defer close(c.done)
	defer c.box.Close()
	due := c.sweep()
	timer := time.NewTimer(0)
	if len(due) == 0 {
		timer.Stop()
	}
	for {
		select {
		case <-c.box.Ready():
			due = append(due, c.box.Take()...)
		case <-timer.C:
		case <-c.life.Done():
			return
		}
		now := time.Now()
		// The due ones at once, a few at a time: one by one, a backlog
		// after a long outage took longer to clear than it grew.
		kept := make([]bool, len(due))
		sem := make(chan struct{}, janitorWidth)
		var wg sync.WaitGroup
		for i := range due {
			if due[i].at.After(now) {
				kept[i] = true
				continue
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				due[i], kept[i] = c.expire(due[i], now)
			})
		}
		wg.Wait()
		if c.life.Err() != nil {
			return
		}
		keep := due[:0]
		var next time.Time
		for i, e := range due {
			if !kept[i] {
				continue
			}
			keep = append(keep, e)
			if next.IsZero() || e.at.Before(next) {
				next = e.at
			}
		}
		due = keep
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
	}
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

// publish publishes ev with what every event of the package carries.
func publish(bus *events.Bus, conn zk.Conn, root, instance, node string, sc trace.SpanContext, ev events.Event) {
	ev.Time, ev.Recipe, ev.Path, ev.Instance, ev.Node = time.Now(), "twophase", root, instance, node
	ev.SessionID, ev.TraceID, ev.SpanID = conn.SessionID(), sc.TraceID(), sc.SpanID()
	bus.Publish(ev)
}
