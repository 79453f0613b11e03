package zk

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes"
)

// UseACL returns a view of conn whose creates (Create, and the CreateOps of
// Multi) that name no ACL use acl instead of the connection's own. Recipes
// use it for their WithACL option. With no acl it returns conn. An entry
// without a scheme, without permissions or with unknown permission bits is
// refused with an error matching ErrBadArguments and
// zkrecipes.ErrInvalidOption.
func UseACL(conn Conn, acl ...ACL) (Conn, error) {
	if len(acl) == 0 {
		return conn, nil
	}
	for _, a := range acl {
		if a.Scheme == "" || a.Perms == 0 || a.Perms&^PermAll != 0 {
			return nil, fmt.Errorf("%w: %w: ACL entry %s:%s with permissions %#x",
				ErrBadArguments, zkrecipes.ErrInvalidOption, a.Scheme, a.ID, int32(a.Perms))
		}
	}
	return aclView{Conn: conn, acl: acl}, nil
}

type aclView struct {
	Conn
	acl []ACL
}

func (v aclView) Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error) {
	return v.Conn.CreateACL(ctx, path, data, mode, v.acl)
}

func (v aclView) CreateACL(ctx context.Context, path string, data []byte, mode CreateMode, acl []ACL) (string, error) {
	if acl == nil {
		acl = v.acl
	}
	return v.Conn.CreateACL(ctx, path, data, mode, acl)
}

func (v aclView) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	withACL := make([]Op, len(ops))
	for i, op := range ops {
		withACL[i] = op
		if c, ok := op.(*CreateOp); ok && c != nil && c.ACL == nil {
			cp := *c
			cp.ACL = v.acl
			withACL[i] = &cp
		}
	}
	return v.Conn.Multi(ctx, withACL...)
}

// Unwrap returns the Conn the view was made from.
func (v aclView) Unwrap() Conn { return v.Conn }

// Underlying follows Unwrap from conn to the first Conn that is a T, for
// code that needs one implementation's own methods (a simulator's faults,
// the server address a span names) behind the views of this package.
func Underlying[T any](conn Conn) (T, bool) {
	for conn != nil {
		if t, ok := conn.(T); ok {
			return t, true
		}
		u, ok := conn.(interface{ Unwrap() Conn })
		if !ok {
			break
		}
		conn = u.Unwrap()
	}
	var zero T
	return zero, false
}
