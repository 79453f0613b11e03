package twophase

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Participant takes part, under its id, in the transactions proposed
// under a root path. Serve runs it; its methods are safe for concurrent
// use.
type Participant struct {
	conn   zk.Conn
	p      paths
	id     string
	h      Handler
	tracer trace.Tracer
	bus    *events.Bus

	life   context.Context // cancelled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	serving   bool
	served    sync.WaitGroup
	closeOnce sync.Once
}

// NewParticipant returns the participant id of the transactions under root,
// whose votes and decisions go to h. Nothing is sent to the server until
// Serve. Errors: zk.ErrInvalidPath for a bad root, ErrInvalidID for a bad
// id, ErrNilHandler, ErrClosed for a nil connection.
func NewParticipant(conn zk.Conn, root, id string, h Handler) (*Participant, error) {
	if err := validRoot(root); err != nil {
		return nil, err
	}
	if err := validID("participant", id); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, ErrNilHandler
	}
	if conn == nil {
		return nil, ErrClosed
	}
	p := &Participant{conn: conn, p: paths{root}, id: id, h: h, tracer: tracer(nil), bus: events.NewBus()}
	p.life, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Subscribe returns a subscription to the participant's events: PREPARED
// (its handler voted), VOTED (the vote is written; a no vote carries its
// reason in Err), COMMITTED, ABORTED (the reason in Err) once its handler
// returned.
func (p *Participant) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return p.bus.Subscribe(opts...)
}

// Close stops Serve and waits for it to return; later calls return
// ErrClosed.
func (p *Participant) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
		p.served.Wait()
		p.bus.Close()
	})
	return nil
}

// Serve registers the participant and handles its transactions until ctx
// ends (it returns ctx.Err()) or Close (ErrClosed): it votes on new ones
// with the Handler's Prepare, and calls Commit or Abort on each decided one,
// including those it missed while it was not serving. Errors of the server
// are retried; one Serve at a time (ErrServing).
func (p *Participant) Serve(ctx context.Context) error {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return ErrClosed
	case p.serving:
		p.mu.Unlock()
		return ErrServing
	}
	p.serving = true
	p.served.Add(1)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.serving = false
		p.mu.Unlock()
		p.served.Done()
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.life, cancel)()
	s := &server{Participant: p, ctx: sctx, quit: make(chan struct{}), txs: make(map[string]*ptx)}
	s.run()
	if p.life.Err() != nil {
		return ErrClosed
	}
	return ctx.Err()
}

// server is one Serve: its state is owned by Serve's goroutine.
type server struct {
	*Participant
	ctx  context.Context
	box  runtime.Mailbox[pmsg]
	quit chan struct{} // stops the watch forwarders
	fwd  sync.WaitGroup

	txs        map[string]*ptx
	inboxArmed bool // a child watch on our inbox is pending
	regArmed   bool // a watch on our registration node is pending
	retry      *time.Timer
	failed     bool
	b          backoff
}

type msgKind int

const (
	msgSession msgKind = iota + 1
	msgInbox
	msgReg
	msgDecision
	msgCoordinator
)

type pmsg struct {
	kind    msgKind
	tx      string
	ev      zk.WatchEvent
	session zk.SessionEvent
}

// txState is where a transaction is, for this participant.
type txState int

const (
	stLoad    txState = iota // read the transaction
	stCheck                  // decided? voted?
	stPrepare                // call Prepare
	stVote                   // write the vote
	stVoted                  // wait for the decision
	stDecided                // call Commit or Abort
	stHandled                // delete the inbox entry
)

type ptx struct {
	id         string
	state      txState
	tx         Tx
	yes        bool
	reason     string
	outcome    Outcome
	decArmed   bool // a watch for the decision is pending
	coordArmed bool // a watch on the coordinator node is pending
	ctx        context.Context
	span       trace.Span
}

func (s *server) run() {
	unsubscribe := s.conn.Subscribe(func(ev zk.SessionEvent) { s.box.Put(pmsg{kind: msgSession, session: ev}) })
	defer func() {
		unsubscribe()
		close(s.quit)
		s.fwd.Wait()
		s.box.Close()
		if s.retry != nil {
			s.retry.Stop()
		}
		for _, t := range s.txs {
			if t.span != nil {
				t.span.End()
			}
		}
		s.deregister()
	}()
	s.resync()
	for {
		var retry <-chan time.Time
		if s.retry != nil {
			retry = s.retry.C
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.box.Ready():
			for _, m := range s.box.Take() {
				if s.ctx.Err() != nil {
					return
				}
				s.handle(m)
			}
		case <-retry:
			s.retry = nil
			s.resync()
		}
	}
}

func (s *server) handle(m pmsg) {
	if m.ev.Type == zk.EventNotWatching {
		s.disarm()
	}
	switch m.kind {
	case msgSession:
		switch m.session.State {
		case zk.StateLost:
			s.disarm()
		case zk.StateConnected, zk.StateReconnected:
			s.resync()
		}
	case msgInbox:
		s.inboxArmed = false
		fresh, err := s.syncInbox()
		if err != nil {
			s.fail(err)
		}
		for _, t := range fresh {
			s.advance(t)
		}
	case msgReg:
		s.regArmed = false
		if err := s.register(); err != nil {
			s.fail(err)
		}
	case msgDecision, msgCoordinator:
		t, ok := s.txs[m.tx]
		if !ok {
			return
		}
		if m.kind == msgDecision {
			t.decArmed = false
		} else {
			t.coordArmed = false
		}
		s.advance(t)
	}
}

// disarm forgets every watch: the session that had them is gone.
func (s *server) disarm() {
	s.inboxArmed, s.regArmed = false, false
	for _, t := range s.txs {
		t.decArmed, t.coordArmed = false, false
	}
}

// resync registers, lists the inbox and moves every transaction on.
func (s *server) resync() {
	s.failed = false
	// The inbox first: once we are registered, Proposes naming us find it.
	if _, err := s.syncInbox(); err != nil {
		s.fail(err)
		return
	}
	if err := s.register(); err != nil {
		s.fail(err)
	}
	for _, t := range s.txs {
		s.advance(t)
	}
	if !s.failed {
		s.b.reset()
	}
}

// fail schedules a resync after an error of the server.
func (s *server) fail(err error) {
	if s.ctx.Err() != nil || err == nil {
		return
	}
	s.failed = true
	if s.retry == nil {
		s.retry = time.NewTimer(s.b.next())
	}
}

// forward posts m with the event of w once it fires, until Serve ends.
func (s *server) forward(w <-chan zk.WatchEvent, m pmsg) {
	s.fwd.Add(1)
	go func() {
		defer s.fwd.Done()
		select {
		case ev, ok := <-w:
			if ok {
				m.ev = ev
				s.box.Put(m)
			}
		case <-s.quit:
		}
	}()
}

// register creates our ephemeral registration node, or watches the one an
// old session of ours still has until it goes.
func (s *server) register() error {
	if s.regArmed {
		return nil
	}
	path := s.p.participant(s.id)
	if err := ensurePath(s.ctx, s.conn, s.p.participants()); err != nil {
		return err
	}
	for range 3 {
		_, err := s.conn.Create(s.ctx, path, nil, zk.ModeEphemeral)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		_, ok, w, err := s.conn.ExistsW(s.ctx, path)
		if err != nil {
			return err
		}
		if ok {
			s.regArmed = true
			s.forward(w, pmsg{kind: msgReg})
			return nil
		}
	}
	return fmt.Errorf("twophase: registering %q: %w", s.id, zk.ErrNoNode)
}

// deregister deletes our registration node, if our session owns it.
func (s *server) deregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, ok, err := s.conn.Exists(ctx, s.p.participant(s.id))
	if err == nil && ok && st.EphemeralOwner == s.conn.SessionID() {
		_ = s.conn.Delete(ctx, s.p.participant(s.id), st.Version)
	}
}

// syncInbox lists our inbox (leaving a child watch) and returns the
// transactions new to us.
func (s *server) syncInbox() ([]*ptx, error) {
	if s.inboxArmed {
		return nil, nil
	}
	inbox := s.p.inbox(s.id)
	kids, _, w, err := s.conn.ChildrenW(s.ctx, inbox)
	if errors.Is(err, zk.ErrNoNode) {
		// Made once: a create, even one that finds the node, is a write.
		if err := ensurePath(s.ctx, s.conn, inbox); err != nil {
			return nil, err
		}
		kids, _, w, err = s.conn.ChildrenW(s.ctx, inbox)
	}
	if err != nil {
		return nil, err
	}
	s.inboxArmed = true
	s.forward(w, pmsg{kind: msgInbox})
	var fresh []*ptx
	for _, id := range kids {
		if _, ok := s.txs[id]; !ok {
			t := &ptx{id: id}
			s.txs[id] = t
			fresh = append(fresh, t)
		}
	}
	return fresh, nil
}

func (s *server) advance(t *ptx) {
	if err := s.step(t); err != nil {
		s.fail(err)
	}
}

// step moves t on as far as it can without waiting.
func (s *server) step(t *ptx) error {
	for {
		switch t.state {
		case stLoad:
			// The transaction, its decision (with a watch) and our vote,
			// read at once: one round trip.
			var (
				data, vote []byte
				err, verr  error
				wg         sync.WaitGroup
			)
			wg.Go(func() { data, _, err = s.conn.Get(s.ctx, s.p.tx(t.id)) })
			wg.Go(func() { vote, _, verr = s.conn.Get(s.ctx, s.p.vote(t.id, s.id)) })
			decided, derr := s.readDecision(t)
			wg.Wait()
			if errors.Is(err, zk.ErrNoNode) {
				t.state = stHandled // gone (retention): nothing to learn
				continue
			}
			if err != nil {
				return err
			}
			d, err := decodeTx(data)
			if err != nil {
				t.state = stHandled // not ours to read
				continue
			}
			t.tx = Tx{ID: t.id, Payload: d.Payload}
			t.ctx, t.span = s.tracer.Start(s.ctx, "twophase.participate "+t.id, trace.WithAttributes(
				attribute.String("twophase.tx", t.id), attribute.String("twophase.participant", s.id),
				attribute.String("zk.path", s.p.root)))
			switch {
			case derr != nil:
				return derr
			case decided:
				continue // readDecision moved it on
			case errors.Is(verr, zk.ErrNoNode):
				t.state = stPrepare
			case verr != nil:
				return verr
			default:
				t.yes, t.reason = decodeVote(vote)
				t.state = stVoted
			}
		case stCheck:
			decided, err := s.readDecision(t)
			if err != nil {
				return err
			}
			if decided {
				continue
			}
			data, _, err := s.conn.Get(s.ctx, s.p.vote(t.id, s.id))
			switch {
			case errors.Is(err, zk.ErrNoNode):
				t.state = stPrepare
			case err != nil:
				return err
			default:
				t.yes, t.reason = decodeVote(data)
				t.state = stVoted
			}
		case stPrepare:
			pctx, span := s.tracer.Start(t.ctx, "twophase.prepare")
			yes, err := s.h.Prepare(pctx, t.tx)
			span.End()
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			t.yes, t.reason = yes, ""
			if err != nil {
				t.yes, t.reason = false, err.Error()
			} else if !yes {
				t.reason = "voted no"
			}
			s.emit(t, events.Event{Type: events.Prepared, Phase: events.PhaseBegin, State: statePrepared})
			t.state = stVote
		case stVote:
			_, err := s.conn.Create(s.ctx, s.p.vote(t.id, s.id), encodeVote(t.yes, t.reason), zk.ModePersistent)
			switch {
			case errors.Is(err, zk.ErrNodeExists): // ours, after a lost reply
				data, _, gerr := s.conn.Get(s.ctx, s.p.vote(t.id, s.id))
				if gerr != nil {
					return gerr
				}
				t.yes, t.reason = decodeVote(data)
			case errors.Is(err, zk.ErrNoNode):
				t.state = stLoad // the transaction is gone
				continue
			case err != nil:
				return err
			}
			ev := events.Event{Type: events.Voted, State: stateVoted}
			if !t.yes {
				ev.Err = fmt.Errorf("%w: %s", ErrAborted, t.reason)
			}
			s.emit(t, ev)
			t.state = stVoted
		case stVoted:
			if !t.yes {
				out, err := decide(s.ctx, s.conn, s.p, t.id, Outcome{Reason: s.id + ": " + t.reason})
				if err != nil {
					return err
				}
				t.outcome, t.state = out, stDecided
				continue
			}
			decided, err := s.readDecision(t)
			if err != nil {
				return err
			}
			if decided {
				continue
			}
			if t.coordArmed {
				return nil // wait
			}
			_, ok, w, err := s.conn.ExistsW(s.ctx, s.p.coordinator(t.id))
			if err != nil {
				return err
			}
			if ok {
				t.coordArmed = true
				s.forward(w, pmsg{kind: msgCoordinator, tx: t.id})
				return nil // wait
			}
			out, err := decide(s.ctx, s.conn, s.p, t.id, Outcome{Reason: ReasonCoordinatorGone})
			if err != nil {
				return err
			}
			t.outcome, t.state = out, stDecided
		case stDecided:
			name := "twophase.commit"
			if !t.outcome.Committed {
				name = "twophase.abort"
			}
			hctx, span := s.tracer.Start(t.ctx, name)
			var err error
			if t.outcome.Committed {
				err = s.h.Commit(hctx, t.tx)
			} else {
				err = s.h.Abort(hctx, t.tx, t.outcome.Reason)
			}
			if err != nil {
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			if err != nil {
				return fmt.Errorf("twophase: handler: %w", err)
			}
			ev := events.Event{Type: events.Committed, Phase: events.PhaseEnded, State: stateDecided}
			if !t.outcome.Committed {
				ev = events.Event{Type: events.Aborted, Phase: events.PhaseFailed, State: stateDecided,
					Err: fmt.Errorf("%w: %s", ErrAborted, t.outcome.Reason)}
			}
			s.emit(t, ev)
			t.state = stHandled
		case stHandled:
			err := s.conn.Delete(s.ctx, s.p.inboxEntry(s.id, t.id), zk.AnyVersion)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			if t.span != nil {
				t.span.SetAttributes(attribute.Bool("twophase.committed", t.outcome.Committed))
				t.span.End()
			}
			delete(s.txs, t.id)
			return nil
		}
	}
}

// readDecision moves t to stDecided if the decision is made, else leaves a
// watch for it (once).
func (s *server) readDecision(t *ptx) (bool, error) {
	if t.decArmed {
		return false, nil
	}
	_, ok, w, err := s.conn.ExistsW(s.ctx, s.p.decision(t.id))
	if err != nil {
		return false, err
	}
	if !ok {
		t.decArmed = true
		s.forward(w, pmsg{kind: msgDecision, tx: t.id})
		return false, nil
	}
	data, _, err := s.conn.Get(s.ctx, s.p.decision(t.id))
	if errors.Is(err, zk.ErrNoNode) {
		t.state = stHandled // deleted after its retention
		return true, nil
	}
	if err != nil {
		return false, err
	}
	t.outcome, t.state = decodeDecision(data), stDecided
	return true, nil
}

func (s *server) emit(t *ptx, ev events.Event) {
	var sc trace.SpanContext
	if t.span != nil {
		sc = t.span.SpanContext()
	}
	publish(s.bus, s.conn, s.p.root, s.id, s.p.tx(t.id), sc, ev)
}

// WaitRegistered waits until every participant of ids is registered under
// root (it is serving, so a Propose naming it is not refused with
// ErrUnknownParticipant), or ctx ends (ctx.Err()).
func WaitRegistered(ctx context.Context, conn zk.Conn, root string, ids ...string) error {
	if err := validRoot(root); err != nil {
		return err
	}
	if conn == nil {
		return ErrClosed
	}
	p := paths{root}
	for _, id := range ids {
		if err := validID("participant", id); err != nil {
			return err
		}
		var b backoff
		for {
			_, ok, w, err := conn.ExistsW(ctx, p.participant(id))
			if ok {
				break
			}
			if err != nil {
				if !retryable(err) {
					return fmt.Errorf("twophase: %w", err)
				}
				if err := wait(ctx, b.next()); err != nil {
					return err
				}
				continue
			}
			select {
			case <-w:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}
