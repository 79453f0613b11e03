package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Attribute keys of the recipes' spans and metrics, by the OpenTelemetry
// database conventions (db.*, server.*), with ZooKeeper's own facts under
// zookeeper.* and the recipes' under zkrecipes.*.
const (
	AttrDBSystem      = attribute.Key("db.system.name")       // always "zookeeper"
	AttrDBOperation   = attribute.Key("db.operation.name")    // a request: "create", "children", "multi", ...
	AttrServerAddress = attribute.Key("server.address")       // the server the session is on, when the connection knows it
	AttrServerPort    = attribute.Key("server.port")          // its port
	AttrErrorType     = attribute.Key("error.type")           // a failure's stable type name ("session_lost", "no_node", ...)
	AttrSessionID     = attribute.Key("zookeeper.session.id") // hex, "0x…", as in events and logs
	AttrNode          = attribute.Key("zookeeper.node")       // a node's full path: a request's, or a grant's
	AttrCzxid         = attribute.Key("zookeeper.czxid")      // a grant's node's czxid: its fencing token
	AttrResult        = attribute.Key("zookeeper.result")     // a request's expected, non-error outcome ("no_node", "node_exists")
	AttrRecipe        = attribute.Key("zkrecipes.recipe")     // "lock", "election", ...
	AttrPath          = attribute.Key("zkrecipes.path")       // the recipe's directory
	AttrInstance      = attribute.Key("zkrecipes.instance")   // the handle's id, as on its events
	AttrOutcome       = attribute.Key("zkrecipes.outcome")    // how a hold ended: "released", or its cause's error type ("session_lost", "suspended", ...)
)

// DBSystem is the value of db.system.name.
const DBSystem = "zookeeper"

// SessionHex is a session id as events, logs and spans show it: "0x…".
func SessionHex(id int64) string { return fmt.Sprintf("%#x", uint64(id)) }

// durationBuckets are the histograms' bounds in seconds: requests from a
// fraction of a millisecond, holds up to an hour.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Telemetry makes one recipe instance's spans and measurements: its tracer
// and meter under the recipe's scope, its instruments, and the attributes
// every span of it carries. A nil *Telemetry makes nothing.
type Telemetry struct {
	recipe, path string
	attrs        []attribute.KeyValue // recipeAttrs, made once
	conn         zk.Conn
	tracer       trace.Tracer
	meter        metric.Meter
	opDuration   metric.Float64Histogram
	holdDuration metric.Float64Histogram
	opAttrs      sync.Map // opKey → metric.MeasurementOption: a request's measurement attributes, made once
}

// opKey names the attributes of a request's measurement: its operation
// and, when it failed, its error type.
type opKey struct{ op, errType string }

// TelemetryConfig says where a recipe instance's telemetry goes.
type TelemetryConfig struct {
	TracerProvider trace.TracerProvider // default: otel's global provider
	MeterProvider  metric.MeterProvider // default: otel's global provider
	Scope, Version string               // the recipe package's ScopeName and Version
	Recipe         string               // "lock", "election", ...: names spans
	Path           string               // the recipe's directory
	Instance       string               // the handle's id
}

// NewTelemetry makes the tracer, meter and instruments of one recipe
// instance on conn. Instruments that cannot be made are no-ops (the SDK
// reports why through otel's error handler).
func NewTelemetry(conn zk.Conn, cfg TelemetryConfig) *Telemetry {
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	t := &Telemetry{recipe: cfg.Recipe, path: cfg.Path, attrs: recipeAttrs(cfg), conn: conn,
		tracer: cfg.TracerProvider.Tracer(cfg.Scope, trace.WithInstrumentationVersion(cfg.Version)),
		meter:  cfg.MeterProvider.Meter(cfg.Scope, metric.WithInstrumentationVersion(cfg.Version)),
	}
	var err error
	t.opDuration, err = t.meter.Float64Histogram("db.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of ZooKeeper requests made by recipes."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	t.holdDuration, err = t.meter.Float64Histogram("zkrecipes.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a grant (lock held, leadership, lease) to its end: released or lost."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	return t
}

// Tracer is the instance's tracer.
func (t *Telemetry) Tracer() trace.Tracer { return t.tracer }

// Meter is the instance's meter, for a recipe's own instruments.
func (t *Telemetry) Meter() metric.Meter { return t.meter }

// Recipe and Path are what the Telemetry was made for.
func (t *Telemetry) Recipe() string { return t.recipe }

// Path is the recipe's directory.
func (t *Telemetry) Path() string { return t.path }

// recipeAttrs are on every span and measurement of the instance.
func recipeAttrs(cfg TelemetryConfig) []attribute.KeyValue {
	kv := []attribute.KeyValue{AttrDBSystem.String(DBSystem), AttrRecipe.String(cfg.Recipe), AttrPath.String(cfg.Path)}
	if cfg.Instance != "" {
		kv = append(kv, AttrInstance.String(cfg.Instance))
	}
	return kv
}

// withRecipe returns the instance's attributes followed by attrs, in one
// new slice.
func (t *Telemetry) withRecipe(attrs ...attribute.KeyValue) []attribute.KeyValue {
	return append(append(make([]attribute.KeyValue, 0, len(t.attrs)+len(attrs)), t.attrs...), attrs...)
}

// Start opens the span of a recipe operation: "<recipe>.<op> <dir>"
// ("lock.acquire /app/locks/orders"), of kind (INTERNAL for acquire,
// campaign, enter; PRODUCER and CONSUMER for a queue's offer and take),
// with the recipe's attributes and attrs.
func (t *Telemetry) Start(ctx context.Context, op string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, t.recipe+"."+op+" "+t.path, trace.WithSpanKind(kind),
		trace.WithAttributes(t.withRecipe(attrs...)...))
	if !span.IsRecording() {
		return ctx, span
	}
	o := &operationSpan{Span: span}
	return trace.ContextWithSpan(ctx, o), o
}

// operationSpan is a recording operation span (Start) whose end excludes
// the start of its requests' spans (Request): a request made as the
// operation ends is a child that started before the end, or a root linked
// to it (parentOf), never a child that started after its parent ended.
// Requests run on other goroutines than the operation's caller, who ends
// the span when it returns.
type operationSpan struct {
	trace.Span
	mu sync.RWMutex // held for writing by End, for reading by a request's start
}

func (o *operationSpan) End(opts ...trace.SpanEndOption) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Span.End(opts...)
}

// Fail marks span as failed with err, if err is not nil: status Error
// and error.type typ. A span is never given the Ok status.
func Fail(span trace.Span, err error, typ string) {
	if err == nil {
		return
	}
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(AttrErrorType.String(typ))
}

// GrantAttrs are a grant's facts: its node, its czxid (the fencing token)
// and the session it is held on.
func GrantAttrs(node string, czxid int64, session int64) []attribute.KeyValue {
	return []attribute.KeyValue{AttrNode.String(node), AttrCzxid.Int64(czxid), AttrSessionID.String(SessionHex(session))}
}

// serverAttrs are the server the session is on, if the connection knows.
func serverAttrs(conn zk.Conn) []attribute.KeyValue {
	s, ok := zk.Underlying[interface{ Server() string }](conn)
	if !ok {
		return nil
	}
	host, port, err := net.SplitHostPort(s.Server())
	if err != nil || host == "" {
		return nil
	}
	kv := []attribute.KeyValue{AttrServerAddress.String(host)}
	if p, err := strconv.Atoi(port); err == nil {
		kv = append(kv, AttrServerPort.Int(p))
	}
	return kv
}

// expectKey marks a context whose request expects some errors.
type expectKey struct{}

// Expect returns ctx for a request made by Op or a TraceConn whose errors
// errs are an expected outcome, not a failure: a create in a directory
// that may not exist yet (no_node), a read of a node that may be gone.
// Its span then records the outcome as zookeeper.result, with no Error
// status.
func Expect(ctx context.Context, errs ...error) context.Context {
	return context.WithValue(ctx, expectKey{}, errs)
}

func expected(ctx context.Context, err error) bool {
	errs, _ := ctx.Value(expectKey{}).([]error)
	for _, e := range errs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// SetNode names the node a request concerns, on the request's span (ctx
// is the one Op gives its function): the path it created, read or
// deleted, sequence number and all. Span names never carry it.
func SetNode(ctx context.Context, node string) {
	if node != "" {
		trace.SpanFromContext(ctx).SetAttributes(AttrNode.String(node))
	}
}

// afterKey marks a request made after its operation's end.
type afterKey struct{}

// afterOperation marks ctx's request as made after the operation whose
// span ctx holds has ended, or as it ends.
func afterOperation(ctx context.Context) context.Context {
	return context.WithValue(ctx, afterKey{}, true)
}

// parentOf returns the options that place a request's span: under the
// span in ctx while it is in progress; once it has ended, or when ctx
// says the request comes after it (background work: a grant's hold mark,
// a cancelled attempt's clean-up), as a root of its own linked to it.
func parentOf(ctx context.Context) (context.Context, []trace.SpanStartOption) {
	sp := trace.SpanFromContext(ctx)
	sc := sp.SpanContext()
	after, _ := ctx.Value(afterKey{}).(bool)
	if sc.IsValid() && sc.IsSampled() && !sc.IsRemote() && (after || !sp.IsRecording()) {
		return ctx, []trace.SpanStartOption{trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: sc,
			Attributes: []attribute.KeyValue{attribute.String("zkrecipes.link", "operation")}})}
	}
	return ctx, nil
}

// startRequest starts a request's span, placed by parentOf; while it
// starts, the operation span in ctx cannot end (operationSpan).
func (t *Telemetry) startRequest(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if o, ok := trace.SpanFromContext(ctx).(*operationSpan); ok {
		o.mu.RLock()
		defer o.mu.RUnlock()
	}
	ctx, place := parentOf(ctx)
	return t.tracer.Start(ctx, name, append(place, opts...)...)
}

// Request makes one ZooKeeper request, op ("create", "children", ...),
// in a CLIENT span "<op> <dir>" under ctx's span (see parentOf), with the
// database attributes, the session and the server; f's error sets the
// Error status and error.type (typ names it), unless ctx expects it
// (Expect). The request's duration is recorded as
// db.client.operation.duration.
func (t *Telemetry) Request(ctx context.Context, op string, typ func(error) string, f func(ctx context.Context) error) error {
	if t == nil {
		return f(ctx)
	}
	attrs := t.withRecipe(AttrDBOperation.String(op), AttrSessionID.String(SessionHex(t.conn.SessionID())))
	attrs = append(attrs, serverAttrs(t.conn)...)
	start := time.Now()
	ctx, span := t.startRequest(ctx, op+" "+t.path, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	err := f(ctx)
	key := opKey{op: op}
	switch {
	case err == nil:
	case expected(ctx, err):
		span.SetAttributes(AttrResult.String(typ(err)))
	default:
		key.errType = typ(err)
		Fail(span, err, key.errType)
	}
	span.End()
	t.opDuration.Record(context.WithoutCancel(ctx), time.Since(start).Seconds(), t.measurement(key))
	return err
}

// measurement is the attribute set of a request's duration: the same few
// for every request, so made once each (a set is sorted and allocated, on
// every request otherwise). Operations and error types are fixed sets of
// names (error.type is never an error's text), so opAttrs stays small.
func (t *Telemetry) measurement(key opKey) metric.MeasurementOption {
	if o, ok := t.opAttrs.Load(key); ok {
		return o.(metric.MeasurementOption)
	}
	kv := []attribute.KeyValue{AttrDBSystem.String(DBSystem), AttrDBOperation.String(key.op), AttrRecipe.String(t.recipe)}
	if key.errType != "" {
		kv = append(kv, AttrErrorType.String(key.errType))
	}
	o, _ := t.opAttrs.LoadOrStore(key, metric.WithAttributeSet(attribute.NewSet(kv...)))
	return o.(metric.MeasurementOption)
}

// held records a hold's duration, from its grant to its end, and how it
// ended: "released", or its cause's error type.
func (t *Telemetry) held(d time.Duration, outcome string) {
	if t == nil {
		return
	}
	t.holdDuration.Record(context.Background(), d.Seconds(), metric.WithAttributes(
		AttrRecipe.String(t.recipe), AttrPath.String(t.path), AttrOutcome.String(outcome)))
}

// ZKErrorType names ZooKeeper's and the context's errors for error.type;
// "_OTHER" for any other.
func ZKErrorType(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{zk.ErrConnectionLoss, "connection_loss"},
		{zk.ErrSessionExpired, "session_expired"},
		{zk.ErrClosed, "closed"},
		{zk.ErrNoNode, "no_node"},
		{zk.ErrNodeExists, "node_exists"},
		{zk.ErrNotEmpty, "not_empty"},
		{zk.ErrBadVersion, "bad_version"},
		{zk.ErrNoAuth, "no_auth"},
		{zk.ErrInvalidPath, "invalid_path"},
		{zk.ErrBadArguments, "bad_arguments"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "_OTHER"
}

// TraceConn returns conn with each request made in a CLIENT span by
// t.Request (named "<op> <dir>", the request's path as zookeeper.node;
// typ names errors), under the span in the request's ctx: for recipes
// that make requests from their callers' goroutines. Everything else is
// conn's. Use it for requests only: it is not conn (runtime.HandOver and
// the like want the connection itself).
func TraceConn(conn zk.Conn, t *Telemetry, typ func(error) string) zk.Conn {
	if typ == nil {
		typ = ZKErrorType
	}
	return tracedConn{Conn: conn, t: t, typ: typ}
}

type tracedConn struct {
	zk.Conn
	t   *Telemetry
	typ func(error) string
}

func (c tracedConn) req(ctx context.Context, op, path string, f func(ctx context.Context) error) error {
	return c.t.Request(ctx, op, c.typ, func(ctx context.Context) error {
		SetNode(ctx, path)
		return f(ctx)
	})
}

func (c tracedConn) Create(ctx context.Context, path string, data []byte, mode zk.CreateMode) (string, error) {
	return c.CreateACL(ctx, path, data, mode, nil)
}

func (c tracedConn) CreateACL(ctx context.Context, path string, data []byte, mode zk.CreateMode, acl []zk.ACL) (made string, err error) {
	err = c.req(ctx, "create", path, func(ctx context.Context) error {
		made, err = c.Conn.CreateACL(ctx, path, data, mode, acl)
		SetNode(ctx, made)
		return err
	})
	return made, err
}

func (c tracedConn) Delete(ctx context.Context, path string, version int32) error {
	return c.req(ctx, "delete", path, func(ctx context.Context) error { return c.Conn.Delete(ctx, path, version) })
}

func (c tracedConn) Exists(ctx context.Context, path string) (st zk.Stat, ok bool, err error) {
	err = c.req(ctx, "exists", path, func(ctx context.Context) error {
		st, ok, err = c.Conn.Exists(ctx, path)
		return err
	})
	return st, ok, err
}

func (c tracedConn) ExistsW(ctx context.Context, path string) (st zk.Stat, ok bool, w <-chan zk.WatchEvent, err error) {
	err = c.req(ctx, "exists", path, func(ctx context.Context) error {
		st, ok, w, err = c.Conn.ExistsW(ctx, path)
		return err
	})
	return st, ok, w, err
}

func (c tracedConn) Get(ctx context.Context, path string) (data []byte, st zk.Stat, err error) {
	err = c.req(ctx, "get", path, func(ctx context.Context) error {
		data, st, err = c.Conn.Get(ctx, path)
		return err
	})
	return data, st, err
}

func (c tracedConn) GetW(ctx context.Context, path string) (data []byte, st zk.Stat, w <-chan zk.WatchEvent, err error) {
	err = c.req(ctx, "get", path, func(ctx context.Context) error {
		data, st, w, err = c.Conn.GetW(ctx, path)
		return err
	})
	return data, st, w, err
}

func (c tracedConn) Children(ctx context.Context, path string) (kids []string, st zk.Stat, err error) {
	err = c.req(ctx, "children", path, func(ctx context.Context) error {
		kids, st, err = c.Conn.Children(ctx, path)
		return err
	})
	return kids, st, err
}

func (c tracedConn) ChildrenW(ctx context.Context, path string) (kids []string, st zk.Stat, w <-chan zk.WatchEvent, err error) {
	err = c.req(ctx, "children", path, func(ctx context.Context) error {
		kids, st, w, err = c.Conn.ChildrenW(ctx, path)
		return err
	})
	return kids, st, w, err
}

func (c tracedConn) Set(ctx context.Context, path string, data []byte, version int32) (st zk.Stat, err error) {
	err = c.req(ctx, "set", path, func(ctx context.Context) error {
		st, err = c.Conn.Set(ctx, path, data, version)
		return err
	})
	return st, err
}

func (c tracedConn) Multi(ctx context.Context, ops ...zk.Op) (res []zk.OpResult, err error) {
	err = c.t.Request(ctx, "multi", c.typ, func(ctx context.Context) error {
		res, err = c.Conn.Multi(ctx, ops...)
		return err
	})
	return res, err
}

func (c tracedConn) Sync(ctx context.Context, path string) error {
	return c.req(ctx, "sync", path, func(ctx context.Context) error { return c.Conn.Sync(ctx, path) })
}
