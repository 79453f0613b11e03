package twophase

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// exec makes one command's requests (or handler call) off the actor and
// posts their replies (and a watch's event) back as inputs. Requests are
// not retried here: an error goes back to the machine, which makes the
// command again at its next resync (every request is safe to repeat: a
// create that finds its node reads it).
func (p *Participant) exec(sh *runtime.Shell[input, command], cmd command, op runtime.Op) {
	conn, ps, do := p.conn, p.p, expecting(op)
	switch c := cmd.(type) {
	case listInbox:
		sh.GoInOrder(func(ctx context.Context) (input, bool) { // in order: see inboxListed
			r := listed{What: "inbox", ref: c.ref}
			inbox := ps.inbox(p.id)
			var w <-chan zk.WatchEvent
			list := func(ctx context.Context) (err error) {
				r.Kids, _, w, err = conn.ChildrenW(ctx, inbox)
				return err
			}
			r.Err = do(ctx, "children", list)
			if errors.Is(r.Err, zk.ErrNoNode) {
				// Made once: a create, even one that finds the node, is a write.
				if r.Err = runtime.EnsurePath(ctx, conn, op, inbox, zk.ModePersistent); r.Err == nil {
					r.Err = do(ctx, "children", list)
				}
			}
			return watch(ctx, nil, sh, r, r.Err, w, fired{What: "inbox", ref: c.ref})
		})
	case register:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := done{What: "registered", ref: c.ref}
			var w <-chan zk.WatchEvent
			r.Err = do(ctx, "create", func(ctx context.Context) (err error) {
				w, err = p.register(ctx)
				return err
			})
			return watch(ctx, nil, sh, r, r.Err, w, fired{What: "registration", ref: c.ref})
		})
	case load:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := loaded{ref: c.ref}
			// The transaction, its decision (with a watch) and our vote,
			// read at once: one round trip.
			var (
				data, vote []byte
				err, verr  error
				wg         sync.WaitGroup
			)
			wg.Go(func() {
				err = do(ctx, "get", func(ctx context.Context) (err error) { data, _, err = conn.Get(ctx, ps.tx(c.Tx)); return err })
			})
			wg.Go(func() {
				verr = do(ctx, "get", func(ctx context.Context) (err error) { vote, _, err = conn.Get(ctx, ps.vote(c.Tx, p.id)); return err })
			})
			d, w, derr := lookDecision(ctx, conn, ps, do, c.Tx, false)
			wg.Wait()
			switch {
			case errors.Is(err, zk.ErrNoNode):
				r.Gone = true
				return r, true
			case err != nil:
				r.Err = err
				return r, true
			}
			td, jerr := decodeTx(data)
			if jerr != nil {
				r.Bad = true
				return r, true
			}
			r.Payload = td.Payload
			switch {
			case derr != nil:
				r.Err = derr
			case d.Exists:
				r.Decided, r.Outcome = true, d.Outcome
			case d.Gone:
				r.DecGone = true
			case errors.Is(verr, zk.ErrNoNode):
			case verr != nil:
				r.Err = verr
			default:
				r.Voted = true
				r.Yes, r.Reason = decodeVote(vote)
			}
			r.DecWatched = r.Err == nil && w != nil
			return watch(ctx, nil, sh, r, r.Err, w, fired{What: "decision", ref: c.ref})
		})
	case prepare:
		p.callHandler(sh, c.Tx, "prepare", func(ctx context.Context, cut func() bool) (input, error) {
			yes, err := p.h.Prepare(ctx, Tx{ID: c.Tx, Payload: c.Payload})
			r := prepared{ref: c.ref, Yes: yes, Cancelled: cut()}
			if err != nil {
				r.Yes, r.Reason = false, err.Error()
			} else if !yes {
				r.Reason = "voted no"
			}
			return r, nil // a no vote: the span is no failure
		})
	case vote:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := voteWritten{ref: c.ref, Yes: c.Yes, Reason: c.Reason}
			path := ps.vote(c.Tx, p.id)
			var err error
			if !c.Yes {
				// The vote and the abort it decides, in one multi.
				err = do(ctx, "multi", func(ctx context.Context) error {
					_, err := conn.Multi(ctx,
						&zk.CreateOp{Path: path, Data: encodeVote(false, c.Reason), Mode: zk.ModePersistent},
						&zk.CreateOp{Path: ps.decision(c.Tx), Data: encodeDecision(c.Abort), Mode: zk.ModePersistent})
					return err
				})
				if err == nil {
					r.Decided, r.Outcome = true, c.Abort
				}
			}
			if c.Yes || errors.Is(err, zk.ErrNodeExists) {
				// A yes; or a no whose multi found our vote made (after a
				// lost reply, with its decision) or the decision made
				// first: either way an abort decision is there, and our
				// vote, if not made yet, is made alone.
				err = do(ctx, "create", func(ctx context.Context) error {
					_, err := conn.Create(ctx, path, encodeVote(c.Yes, c.Reason), zk.ModePersistent)
					return err
				})
			}
			switch {
			case errors.Is(err, zk.ErrNodeExists): // ours, after a lost reply
				var data []byte
				r.Err = do(ctx, "get", func(ctx context.Context) (err error) { data, _, err = conn.Get(ctx, path); return err })
				r.Found = true
				r.Yes, r.Reason = decodeVote(data)
			case errors.Is(err, zk.ErrNoNode):
				r.Gone = true
			default:
				r.Err = err
			}
			return r, true
		})
	case handle:
		name, tx := "abort", Tx{ID: c.Tx, Payload: c.Payload}
		if c.Outcome.Committed {
			name = "commit"
		}
		p.callHandler(sh, c.Tx, name, func(ctx context.Context, cut func() bool) (input, error) {
			var err error
			if c.Outcome.Committed {
				err = p.h.Commit(ctx, tx)
			} else {
				err = p.h.Abort(ctx, tx, c.Outcome.Reason)
			}
			// A handler that returned nil did its work, even when Serve's
			// ctx ended meanwhile: only a failure then counts as cut short.
			r := handled{ref: c.ref, Cancelled: err != nil && cut()}
			if err != nil {
				r.Err = fmt.Errorf("twophase: handler: %w", err)
			}
			return r, err
		})
	case deleteEntry:
		sh.GoInOrder(func(ctx context.Context) (input, bool) { // in order: see inboxListed
			r := done{What: "entry deleted", ref: c.ref}
			r.Err = do(ctx, "delete", func(ctx context.Context) error {
				err := conn.Delete(ctx, ps.inboxEntry(p.id, c.Tx), zk.AnyVersion)
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return err
			})
			if r.Err == nil {
				p.endSpans(c.Tx)
			}
			return r, true
		})
	case deregister:
		sh.Go(func(ctx context.Context) (input, bool) {
			p.endSpans("")
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			err := do(dctx, "delete", func(ctx context.Context) error {
				st, ok, err := conn.Exists(ctx, ps.participant(p.id))
				if err == nil && ok && st.EphemeralOwner == conn.SessionID() {
					err = conn.Delete(ctx, ps.participant(p.id), st.Version)
				}
				return err
			})
			if !errors.Is(err, zk.ErrConnectionLoss) && !errors.Is(err, context.DeadlineExceeded) {
				err = nil // done, or nothing a retry would change
			}
			return done{What: "deregistered", ref: c.ref, Err: err}, true
		})
	default:
		execShared(sh, conn, ps, do, nil, cmd)
	}
}

// doFunc makes one request, named name, in a CLIENT span (see expecting).
type doFunc func(ctx context.Context, name string, f func(ctx context.Context) error) error

// expecting makes requests with op, with no_node and node_exists among
// their expected answers (a transaction deleted after its retention, a
// decision not made yet, a create that finds its node): the machines
// take them as states, and their spans do not show them as failures.
func expecting(op runtime.Op) doFunc {
	return func(ctx context.Context, name string, f func(ctx context.Context) error) error {
		var err error
		op(runtime.Expect(ctx, zk.ErrNoNode, zk.ErrNodeExists), name, func(ctx context.Context) error { err = f(ctx); return err })
		return err
	}
}

// execShared makes the commands both machines make; their watches are
// given up when until closes (nil: never).
func execShared(sh *runtime.Shell[input, command], conn zk.Conn, ps paths, do doFunc, until <-chan struct{}, cmd command) {
	switch c := cmd.(type) {
	case readDecision:
		sh.Go(func(ctx context.Context) (input, bool) {
			r, w, err := lookDecision(ctx, conn, ps, do, c.Tx, c.Made)
			r.Cmd, r.Tx, r.Err = c.Cmd, c.Tx, err
			return watch(ctx, until, sh, r, err, w, fired{What: "decision", ref: c.ref})
		})
	case watchCoord:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := coordWatched{ref: c.ref}
			var w <-chan zk.WatchEvent
			r.Err = do(ctx, "get", func(ctx context.Context) (err error) {
				r.Exists, w, err = runtime.WatchDeletion(ctx, conn, ps.coordinator(c.Tx))
				return err
			})
			return watch(ctx, until, sh, r, r.Err, w, fired{What: "coordinator", ref: c.ref})
		})
	case makeDecision:
		sh.Go(func(ctx context.Context) (input, bool) {
			r := decided{ref: c.ref}
			var err error
			do(ctx, "create", func(ctx context.Context) error {
				r.Outcome, err = decide(ctx, conn, ps, c.Tx, c.Want)
				return err
			})
			switch {
			case errors.Is(err, zk.ErrNoNode):
				r.Gone = true // the transaction is deleted
			case err != nil:
				r.Err = err
			}
			return r, true
		})
	case sleep:
		// A timer, not a goroutine: a coordinator has one per transaction
		// it keeps, for the retention period. One that fires after the
		// actor stopped posts nothing.
		sh.After(c.Delay, woke{ref: c.ref})
	default:
		panic(fmt.Sprintf("twophase: unknown command %T", cmd))
	}
}

// watch posts r, then waits for w to fire (f, of the event's type), or
// for until to close (nil: never): then the machine, which no longer
// waits for it, gets f of NotWatching. After an error, or with no watch,
// r is the command's last input.
func watch(ctx context.Context, until <-chan struct{}, sh *runtime.Shell[input, command], r input, err error, w <-chan zk.WatchEvent, f fired) (input, bool) {
	if err != nil || w == nil {
		return r, true
	}
	sh.Post(ctx, r, true)
	f.Type = zk.EventNotWatching
	select {
	case ev, ok := <-w:
		if ok {
			f.Type = ev.Type
		}
	case <-until:
	case <-ctx.Done():
		return nil, false
	}
	return f, true
}

// register creates our ephemeral registration node, or finds the one an
// old session of ours still has, and watches it.
func (p *Participant) register(ctx context.Context) (<-chan zk.WatchEvent, error) {
	path := p.p.participant(p.id)
	for range 3 {
		if err := zk.EnsurePath(ctx, p.conn, path, zk.ModeEphemeral); err != nil {
			return nil, err
		}
		_, ok, w, err := p.conn.ExistsW(ctx, path)
		if err != nil {
			return nil, err
		}
		if ok {
			return w, nil
		}
	}
	return nil, fmt.Errorf("twophase: registering %q: %w", p.id, zk.ErrNoNode)
}

// lookDecision reads tx's decision, or leaves a watch for it (w not nil).
// made: a watch said it was created, so it is read at once, with no watch
// left; not found, it is looked for again with the watch (this server may
// be behind the one that sent the event: a watch event does not move the
// session's last seen zxid, and the connection may have moved since).
func lookDecision(ctx context.Context, conn zk.Conn, ps paths, do doFunc, tx string, made bool) (decisionRead, <-chan zk.WatchEvent, error) {
	if made {
		if r, err := getDecision(ctx, conn, ps, do, tx); err != nil || !r.Gone {
			return r, nil, err
		}
	}
	var r decisionRead
	var ok bool
	var w <-chan zk.WatchEvent
	err := do(ctx, "exists", func(ctx context.Context) (err error) {
		_, ok, w, err = conn.ExistsW(ctx, ps.decision(tx))
		return err
	})
	if err != nil {
		return r, nil, err
	}
	if !ok {
		return r, w, nil
	}
	r, err = getDecision(ctx, conn, ps, do, tx)
	return r, nil, err
}

// getDecision reads tx's decision, known to have been made.
func getDecision(ctx context.Context, conn zk.Conn, ps paths, do doFunc, tx string) (decisionRead, error) {
	var r decisionRead
	var data []byte
	err := do(ctx, "get", func(ctx context.Context) (err error) {
		data, _, err = conn.Get(ctx, ps.decision(tx))
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		r.Gone = true // deleted after its retention
	case err != nil:
		return r, err
	default:
		r.Exists, r.Outcome = true, decodeDecision(data)
	}
	return r, nil
}

// callHandler makes the handler call f, named name, on tx off the actor:
// with Serve's ctx, ended also with the actor, and in a span of its own,
// a child of the transaction's. cut says whether Serve's ctx or the
// actor's has ended; f's error marks the span failed.
func (p *Participant) callHandler(sh *runtime.Shell[input, command], tx, name string, f func(ctx context.Context, cut func() bool) (input, error)) {
	p.mu.Lock()
	hctx, ts := p.hctx, p.spans[tx]
	if ts == nil {
		_, ts = p.tel.Start(hctx, "participate", trace.SpanKindInternal, AttrTx.String(tx))
		p.spans[tx] = ts
	}
	p.mu.Unlock()
	hctx, span := p.tel.Start(trace.ContextWithSpan(hctx, ts), name, trace.SpanKindInternal, AttrTx.String(tx))
	sh.Go(func(ctx context.Context) (input, bool) {
		hc, cancel := context.WithCancel(hctx)
		defer cancel()
		defer context.AfterFunc(ctx, cancel)()
		in, err := f(hc, func() bool { return hctx.Err() != nil || ctx.Err() != nil })
		runtime.Fail(span, err, "handler")
		span.End()
		return in, true
	})
}

// endSpans ends the span of transaction tx, or every one ("").
func (p *Participant) endSpans(tx string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, s := range p.spans {
		if tx == "" || id == tx {
			s.End()
			delete(p.spans, id)
		}
	}
}
