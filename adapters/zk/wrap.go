package zk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// authenticator is a Conn that can add an identity to its session: the
// client of Connect, and the simulator's conns.
type authenticator interface {
	AddAuth(ctx context.Context, scheme string, cred []byte) error
}

// Wrap applies to conn, a Conn made elsewhere (the simulator's, for one),
// the options that are not about dialling: it authenticates conn's session
// with each WithAuth (through the AddAuth method of conn, or of a Conn
// under it, found with Underlying), creates the WithChroot node if it is
// missing, and returns a view of conn rooted at the chroot and creating
// nodes with the connection's ACL (WithACL, WithACLProvider, or the
// default WithACL describes). WithTLS, WithSessionTimeout and
// WithReconnectBackoff are ignored: conn is connected already. Bad options
// are refused (ErrInvalidOption) before anything is sent.
//
// On an error conn is left as it is, open; closing it is the caller's.
// Closing the returned view closes conn. Connect dials, then does what
// Wrap does.
func Wrap(ctx context.Context, conn Conn, opts ...Option) (Conn, error) {
	if conn == nil {
		return nil, ErrClosed
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return wrap(ctx, conn, cfg)
}

// wrap is Wrap with its options read.
func wrap(ctx context.Context, conn Conn, cfg config) (Conn, error) {
	if len(cfg.auth) > 0 {
		a, ok := Underlying[authenticator](conn)
		if !ok {
			return nil, fmt.Errorf("%w: WithAuth: %T cannot authenticate", ErrInvalidOption, conn)
		}
		for _, cr := range cfg.auth {
			if err := addAuth(ctx, a, cr); err != nil {
				return nil, fmt.Errorf("zk: authenticating with scheme %q: %w", cr.scheme, err)
			}
		}
	}
	acl := defaultACL(cfg)
	if acl == nil && cfg.provider == nil {
		cfg.logger.Warn().Str("component", "zkrecipes").
			Msg("zk: no ACL option and no authentication: the nodes this connection creates are writable by anyone (world:anyone, all permissions)")
	}
	if cfg.chroot != "" {
		// Look first: creating it would need PermCreate on its parent,
		// which a session may lack where its chroot already exists.
		_, ok, err := conn.Exists(ctx, cfg.chroot)
		if err == nil && !ok {
			root := &aclView{Conn: conn, pick: func(string) []ACL { return aclFor(cfg.provider, acl, "/") }}
			err = EnsurePath(ctx, root, cfg.chroot, ModePersistent)
		}
		if err != nil {
			return nil, fmt.Errorf("zk: creating the chroot %s: %w", cfg.chroot, err)
		}
		conn = &chrootView{Conn: conn, root: cfg.chroot}
	}
	if acl != nil || cfg.provider != nil {
		conn = &aclView{Conn: conn, pick: func(path string) []ACL { return aclFor(cfg.provider, acl, path) }}
	}
	return conn, nil
}

// addAuth adds cr to a's session, again when the connection broke before
// the answer (the session may or may not have it; adding it twice is
// harmless), until ctx ends.
func addAuth(ctx context.Context, a authenticator, cr credential) error {
	for {
		err := a.AddAuth(ctx, cr.scheme, cr.cred)
		if !errors.Is(err, ErrConnectionLoss) {
			return err
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// defaultACL is the ACL of nodes created without one, before a provider
// is asked: WithACL's; with WithAuth, CreatorAll plus world read; else nil,
// which the Conn takes as world:anyone, all permissions.
func defaultACL(cfg config) []ACL {
	switch {
	case cfg.acl != nil:
		return cfg.acl
	case len(cfg.auth) > 0:
		return append(CreatorAll(), WorldACL(PermRead)...)
	}
	return nil
}

// aclFor is the ACL of a node created at path without one: provider's
// answer, or acl when it has none.
func aclFor(provider func(string) []ACL, acl []ACL, path string) []ACL {
	if provider != nil {
		if a := provider(path); len(a) > 0 {
			return a
		}
	}
	return acl
}

// chrootView is a Conn rooted at root: every path it is given is under
// root on the server, and every path it returns is relative to root.
type chrootView struct {
	Conn
	root string
}

// abs is the server's path for the view's path p.
func (v *chrootView) abs(p string) string {
	if p == "/" {
		return v.root
	}
	return v.root + p
}

// rel is the view's path for the server's path p. A path outside the
// chroot (which the server never sends for requests under it) is kept.
func (v *chrootView) rel(p string) string {
	if p == v.root {
		return "/"
	}
	if r, ok := strings.CutPrefix(p, v.root); ok && strings.HasPrefix(r, "/") {
		return r
	}
	return p
}

// Unwrap returns the Conn the view was made from.
func (v *chrootView) Unwrap() Conn { return v.Conn }

// relErr replaces, in the text of an error of the underlying Conn, the
// server's paths by the view's; errors.Is still sees the original.
func (v *chrootView) relErr(err error) error {
	if err == nil {
		return nil
	}
	msg := relText(err.Error(), v.root)
	if msg == err.Error() {
		return err
	}
	return pathError{err: err, msg: msg}
}

// relText rewrites every path in s that is root or under it as relative
// to root. A path starts at the beginning of s or after a character that
// cannot be in one (a space, a quote, ...).
func relText(s, root string) string {
	var b strings.Builder
	for {
		j := strings.Index(s, root)
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := j + len(root)
		startsPath := j == 0 || !pathByte(s[j-1])
		b.WriteString(s[:j])
		switch {
		case startsPath && end < len(s) && s[end] == '/':
		case startsPath && (end == len(s) || !pathByte(s[end])):
			b.WriteString("/")
		default:
			b.WriteString(root)
		}
		s = s[end:]
	}
}

// pathByte reports whether c may appear inside a path in an error text.
func pathByte(c byte) bool {
	return c != ' ' && c != '"' && c != '\'' && c != ',' && c != ':' && c != '(' && c != ')' && c != '\n'
}

// pathError is an error whose text had the chroot taken out.
type pathError struct {
	err error
	msg string
}

func (e pathError) Error() string { return e.msg }
func (e pathError) Unwrap() error { return e.err }

func (v *chrootView) Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error) {
	return v.CreateACL(ctx, path, data, mode, nil)
}

func (v *chrootView) CreateACL(ctx context.Context, path string, data []byte, mode CreateMode, acl []ACL) (string, error) {
	if err := ValidatePath(path); err != nil {
		return "", err
	}
	name, err := v.Conn.CreateACL(ctx, v.abs(path), data, mode, acl)
	if name != "" {
		name = v.rel(name)
	}
	return name, v.relErr(err)
}

func (v *chrootView) Delete(ctx context.Context, path string, version int32) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	return v.relErr(v.Conn.Delete(ctx, v.abs(path), version))
}

func (v *chrootView) Exists(ctx context.Context, path string) (Stat, bool, error) {
	if err := ValidatePath(path); err != nil {
		return Stat{}, false, err
	}
	s, ok, err := v.Conn.Exists(ctx, v.abs(path))
	return s, ok, v.relErr(err)
}

func (v *chrootView) ExistsW(ctx context.Context, path string) (Stat, bool, <-chan WatchEvent, error) {
	if err := ValidatePath(path); err != nil {
		return Stat{}, false, nil, err
	}
	ctx, m := v.mapWatch(ctx)
	s, ok, w, err := v.Conn.ExistsW(ctx, v.abs(path))
	return s, ok, m.channel(w), v.relErr(err)
}

func (v *chrootView) Get(ctx context.Context, path string) ([]byte, Stat, error) {
	if err := ValidatePath(path); err != nil {
		return nil, Stat{}, err
	}
	d, s, err := v.Conn.Get(ctx, v.abs(path))
	return d, s, v.relErr(err)
}

func (v *chrootView) GetW(ctx context.Context, path string) ([]byte, Stat, <-chan WatchEvent, error) {
	if err := ValidatePath(path); err != nil {
		return nil, Stat{}, nil, err
	}
	ctx, m := v.mapWatch(ctx)
	d, s, w, err := v.Conn.GetW(ctx, v.abs(path))
	return d, s, m.channel(w), v.relErr(err)
}

func (v *chrootView) Children(ctx context.Context, path string) ([]string, Stat, error) {
	if err := ValidatePath(path); err != nil {
		return nil, Stat{}, err
	}
	n, s, err := v.Conn.Children(ctx, v.abs(path))
	return n, s, v.relErr(err)
}

func (v *chrootView) ChildrenW(ctx context.Context, path string) ([]string, Stat, <-chan WatchEvent, error) {
	if err := ValidatePath(path); err != nil {
		return nil, Stat{}, nil, err
	}
	ctx, m := v.mapWatch(ctx)
	n, s, w, err := v.Conn.ChildrenW(ctx, v.abs(path))
	return n, s, m.channel(w), v.relErr(err)
}

func (v *chrootView) Set(ctx context.Context, path string, data []byte, version int32) (Stat, error) {
	if err := ValidatePath(path); err != nil {
		return Stat{}, err
	}
	s, err := v.Conn.Set(ctx, v.abs(path), data, version)
	return s, v.relErr(err)
}

func (v *chrootView) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	rooted := make([]Op, len(ops))
	for i, op := range ops {
		p, ok := OpPath(op)
		if !ok {
			return nil, fmt.Errorf("%w: op %d: %T", ErrBadArguments, i, op)
		}
		if err := ValidatePath(p); err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
		switch o := op.(type) {
		case *CreateOp:
			cp := *o
			cp.Path = v.abs(p)
			rooted[i] = &cp
		case *DeleteOp:
			rooted[i] = &DeleteOp{Path: v.abs(p), Version: o.Version}
		case *SetOp:
			rooted[i] = &SetOp{Path: v.abs(p), Data: o.Data, Version: o.Version}
		case *CheckOp:
			rooted[i] = &CheckOp{Path: v.abs(p), Version: o.Version}
		}
	}
	res, err := v.Conn.Multi(ctx, rooted...)
	for i := range res {
		if res[i].Path != "" {
			res[i].Path = v.rel(res[i].Path)
		}
		res[i].Err = v.relErr(res[i].Err)
	}
	return res, v.relErr(err)
}

func (v *chrootView) Sync(ctx context.Context, path string) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	return v.relErr(v.Conn.Sync(ctx, v.abs(path)))
}

// Watch events under a chroot. A Conn fills its watch channels in the
// server's order, and recipes rely on it (when a later event is in its
// channel, an earlier one is in its own). A goroutine per watch copying
// events with their path rewritten would lose that order across watches,
// so the view asks the Conn to rewrite the path itself as it delivers:
// the request's ctx carries a watchPath, which a Conn that can (this
// package's client) takes with RewriteWatchPath. For a Conn that does not,
// the view copies the event on a goroutine of its own; the order across
// watches is then kept only as far as the scheduler keeps it.

// watchPath is the rewrite a chrootView asks of the Conn under it.
type watchPath struct {
	rel   func(string) string
	taken bool // set by the Conn (before it returns) if it rewrites
}

type watchPathKey struct{}

func (v *chrootView) mapWatch(ctx context.Context) (context.Context, *watchPath) {
	m := &watchPath{rel: v.rel}
	if outer, ok := ctx.Value(watchPathKey{}).(*watchPath); ok {
		// A chroot view above this one: rewrite for both.
		m.rel = func(p string) string { return outer.rel(v.rel(p)) }
		outer.taken = true
	}
	return context.WithValue(ctx, watchPathKey{}, m), m
}

// RewriteWatchPath is for Conn implementations: it returns the function
// that a watch requested with ctx (ExistsW, GetW, ChildrenW) must apply to
// its event's Path as the event is put in the watch's channel, and tells
// the view that asked for it (WithChroot's) that the Conn does so. Without
// such a request it returns the identity. A Conn that does not call it
// still works under a chroot: the view then copies each event on a
// goroutine of its own, and the channels no longer fill in the server's
// order across watches. Call it before the request is sent, not after.
func RewriteWatchPath(ctx context.Context) func(path string) string {
	m, ok := ctx.Value(watchPathKey{}).(*watchPath)
	if !ok {
		return func(p string) string { return p }
	}
	m.taken = true
	return m.rel
}

// channel returns w with its event's path rewritten: w itself when the
// Conn rewrote it, else a copy.
func (m *watchPath) channel(w <-chan WatchEvent) <-chan WatchEvent {
	if w == nil || m.taken {
		return w
	}
	out := make(chan WatchEvent, 1)
	go func() {
		defer close(out)
		for ev := range w {
			if ev.Path != "" {
				ev.Path = m.rel(ev.Path)
			}
			out <- ev
		}
	}()
	return out
}
