package twophase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// ScopeName is the instrumentation scope of the package's spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/twophase"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// Errors of the package. Match them with errors.Is.
var (
	// ErrInvalidID: a transaction or participant id is empty, contains a
	// slash, is "." or "..", or is listed twice.
	ErrInvalidID = errors.New("twophase: invalid id")
	// ErrNoParticipants: Propose was given no participant.
	ErrNoParticipants = errors.New("twophase: no participants")
	// ErrUnknownParticipant: a participant of Propose is not registered
	// (not serving) when Propose is called. Nothing was created.
	ErrUnknownParticipant = errors.New("twophase: unknown participant")
	// ErrNilHandler: NewParticipant was given a nil Handler.
	ErrNilHandler = errors.New("twophase: nil handler")
	// ErrTxExists: a transaction with this id already exists.
	ErrTxExists = errors.New("twophase: transaction exists")
	// ErrInvalidOption: an option's value was refused, or the option is
	// not one the constructor can use.
	ErrInvalidOption = fmt.Errorf("twophase: %w", zkrecipes.ErrInvalidOption)
	// ErrServing: Serve was called while the participant is already
	// serving.
	ErrServing = errors.New("twophase: already serving")
	// ErrClosed: the handle is closed, or its connection is nil.
	ErrClosed = fmt.Errorf("twophase: %w", zkrecipes.ErrClosed)
	// ErrCleanupPending: Close could not delete the handle's nodes within
	// WithCloseTimeout (the connection is down); the connection deletes
	// them once the same session is back, the server once it ends.
	ErrCleanupPending = fmt.Errorf("twophase: %w", zkrecipes.ErrCleanupPending)
)

// Abort reasons the package itself gives.
const (
	ReasonVoteTimeout     = "vote timeout"
	ReasonCoordinatorGone = "coordinator session ended"
	ReasonCancelled       = "coordinator cancelled"
)

// Tx is a transaction as a participant's Handler sees it.
type Tx struct {
	ID      string
	Payload []byte
}

// Outcome is the decision on a transaction: committed, or aborted for
// Reason.
type Outcome struct {
	Committed bool
	Reason    string
}

// Handler is a participant's part of the protocol. Its methods are called
// one at a time per participant, off the participant's actor, with a ctx
// that carries Serve's values and ends when Serve's ctx ends or the
// participant is closed; Serve returns only once a call in flight has
// returned.
type Handler interface {
	// Prepare votes on tx: true votes yes. An error votes no with its text
	// as the reason (unless Serve's ctx ended: then nothing is voted, and
	// the next Serve prepares again).
	Prepare(ctx context.Context, tx Tx) (bool, error)
	// Commit applies tx. An error makes the participant call it again later.
	Commit(ctx context.Context, tx Tx) error
	// Abort drops tx. An error makes the participant call it again later.
	Abort(ctx context.Context, tx Tx, reason string) error
}

// Option configures a Coordinator or a Participant. A nil Option is
// ignored; one the constructor cannot use is refused (ErrInvalidOption).
type Option func(*options)

type options struct {
	voteTimeout    time.Duration
	retention      time.Duration
	closeTimeout   time.Duration
	id             string
	idSet          bool
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	coordinator    []string // the coordinator's own options given
	acl            []zk.ACL
}

// WithVoteTimeout bounds how long the coordinator waits for every vote
// before it decides abort with ReasonVoteTimeout. Default 10s; it must be
// positive (ErrInvalidOption). A coordinator's option only.
func WithVoteTimeout(d time.Duration) Option {
	return func(o *options) { o.voteTimeout = d; o.coordinator = append(o.coordinator, "WithVoteTimeout") }
}

// WithRetention is how long a decided transaction's nodes stay at least
// before the coordinator's handle deletes them (once every participant has
// had its call). Default 10 minutes; it must be positive
// (ErrInvalidOption). A coordinator's option only.
func WithRetention(d time.Duration) Option {
	return func(o *options) { o.retention = d; o.coordinator = append(o.coordinator, "WithRetention") }
}

// WithID names the coordinator on its lifecycle events (default
// "coordinator"). A participant's id is NewParticipant's argument: WithID
// given to it must say the same.
func WithID(id string) Option { return func(o *options) { o.id, o.idSet = id, true } }

// WithCloseTimeout bounds how long Close waits for what the handle still
// has to do on the server (a participant's deregistration, a coordinator's
// aborts of the Proposes it cuts short); default 10s, it must be positive
// (ErrInvalidOption). After it, the nodes are left to the connection's
// janitor and Close returns ErrCleanupPending.
func WithCloseTimeout(d time.Duration) Option { return func(o *options) { o.closeTimeout = d } }

// WithTracerProvider sets where spans go. Default: otel's global provider
// (a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithMeterProvider sets where measurements go: the requests'
// db.client.operation.duration, and the coordinator's
// zkrecipes.twophase.transactions. Default: otel's global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider = mp }
}

// WithACL sets the ACL of every node the handle creates (a coordinator's
// transaction, vote, inbox and decision nodes; a participant's
// registration, votes and decisions; and their missing parents), in place
// of the connection's (zk.WithACL, or its default). Default: the
// connection's. An entry without a scheme or permissions is refused
// (ErrInvalidOption).
func WithACL(acl ...zk.ACL) Option { return func(o *options) { o.acl = acl } }

// newOptions applies opts over the defaults, checks what every handle
// uses, and returns conn creating with WithACL's ACL.
func newOptions(conn zk.Conn, opts []Option) (zk.Conn, options, error) {
	o := options{voteTimeout: 10 * time.Second, retention: 10 * time.Minute, closeTimeout: 10 * time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.closeTimeout <= 0 {
		return nil, o, fmt.Errorf("%w: close timeout %v: it must be positive", ErrInvalidOption, o.closeTimeout)
	}
	conn, err := zk.UseACL(conn, o.acl...)
	if err != nil {
		return nil, o, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return conn, o, nil
}

// Span attributes of the two-phase commit.
const (
	AttrTx           = attribute.Key("zkrecipes.twophase.tx")           // the transaction id
	AttrParticipants = attribute.Key("zkrecipes.twophase.participants") // how many take part
	AttrCommitted    = attribute.Key("zkrecipes.twophase.committed")    // the decision
	AttrReason       = attribute.Key("zkrecipes.twophase.reason")       // an abort's reason
)

// validID checks a transaction or participant id: one path segment.
func validID(kind, id string) error {
	if id == "" || id == "." || id == ".." || strings.Contains(id, "/") {
		return fmt.Errorf("%w: %s id %q", ErrInvalidID, kind, id)
	}
	if err := zk.ValidatePath("/" + id); err != nil {
		return fmt.Errorf("%w: %s id %q: %v", ErrInvalidID, kind, id, err)
	}
	return nil
}

// validRoot checks the root path.
func validRoot(root string) error {
	if err := zk.ValidatePath(root); err != nil {
		return fmt.Errorf("twophase: %w", err)
	}
	if root == "/" {
		return fmt.Errorf("twophase: %w %q: the root cannot be the recipe's path", zk.ErrInvalidPath, root)
	}
	return nil
}

// paths is the layout under a root.
type paths struct{ root string }

func (p paths) participants() string            { return zk.Join(p.root, "participants") }
func (p paths) participant(id string) string    { return zk.Join(p.participants(), id) }
func (p paths) inbox(id string) string          { return zk.Join(zk.Join(p.root, "inbox"), id) }
func (p paths) inboxEntry(id, tx string) string { return zk.Join(p.inbox(id), tx) }
func (p paths) txs() string                     { return zk.Join(p.root, "tx") }
func (p paths) tx(id string) string             { return zk.Join(p.txs(), id) }
func (p paths) coordinator(tx string) string    { return zk.Join(p.tx(tx), "coordinator") }
func (p paths) votes(tx string) string          { return zk.Join(p.tx(tx), "votes") }
func (p paths) vote(tx, id string) string       { return zk.Join(p.votes(tx), id) }
func (p paths) decision(tx string) string       { return zk.Join(p.tx(tx), "decision") }

// txData is a transaction node's data.
type txData struct {
	Nonce        string   `json:"nonce"`
	Payload      []byte   `json:"payload"`
	Participants []string `json:"participants"`
}

func encodeDecision(o Outcome) []byte {
	if o.Committed {
		return []byte("commit")
	}
	return []byte("abort:" + o.Reason)
}

func decodeDecision(b []byte) Outcome {
	s := string(b)
	if s == "commit" {
		return Outcome{Committed: true}
	}
	return Outcome{Reason: strings.TrimPrefix(s, "abort:")}
}

func encodeVote(yes bool, reason string) []byte {
	if yes {
		return []byte("yes")
	}
	return []byte("no:" + reason)
}

func decodeVote(b []byte) (yes bool, reason string) {
	s := string(b)
	if s == "yes" {
		return true, ""
	}
	return false, strings.TrimPrefix(s, "no:")
}

func decodeTx(b []byte) (txData, error) {
	var d txData
	err := json.Unmarshal(b, &d)
	return d, err
}

// deleteTx deletes a finished transaction: its node, its votes and
// whatever else is under it (the decision, the coordinator node), in one
// multi once the node and its votes directory are listed (two reads at
// once and one write, where deleteAll reads and writes once per node). A
// node that came or went since the listing fails the multi, and deleteAll
// does it node by node.
func deleteTx(ctx context.Context, conn zk.Conn, p paths, tx string) error {
	var (
		kids, votes       []string
		kidsErr, votesErr error
		wg                sync.WaitGroup
	)
	wg.Go(func() { kids, _, kidsErr = conn.Children(ctx, p.tx(tx)) })
	wg.Go(func() { votes, _, votesErr = conn.Children(ctx, p.votes(tx)) })
	wg.Wait()
	switch {
	case errors.Is(kidsErr, zk.ErrNoNode):
		return nil // deleted already
	case kidsErr != nil:
		return kidsErr
	case votesErr != nil && !errors.Is(votesErr, zk.ErrNoNode):
		return votesErr
	}
	ops := make([]zk.Op, 0, len(votes)+len(kids)+1)
	for _, id := range votes {
		ops = append(ops, &zk.DeleteOp{Path: p.vote(tx, id), Version: zk.AnyVersion})
	}
	for _, k := range kids { // the votes directory after its votes
		ops = append(ops, &zk.DeleteOp{Path: zk.Join(p.tx(tx), k), Version: zk.AnyVersion})
	}
	ops = append(ops, &zk.DeleteOp{Path: p.tx(tx), Version: zk.AnyVersion})
	_, err := conn.Multi(ctx, ops...)
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNotEmpty) {
		return deleteAll(ctx, conn, p.tx(tx))
	}
	return err
}

// deleteAll deletes path and everything under it.
func deleteAll(ctx context.Context, conn zk.Conn, path string) error {
	for {
		kids, _, err := conn.Children(ctx, path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := deleteAll(ctx, conn, zk.Join(path, k)); err != nil {
				return err
			}
		}
		err = conn.Delete(ctx, path, zk.AnyVersion)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if !errors.Is(err, zk.ErrNotEmpty) {
			return err
		}
	}
}

// backoff is a retry delay that doubles from 20ms to 1s.
type backoff struct{ d time.Duration }

func (b *backoff) next() time.Duration {
	switch {
	case b.d == 0:
		b.d = 20 * time.Millisecond
	case b.d < time.Second:
		b.d *= 2
	}
	return b.d
}
