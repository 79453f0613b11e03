package zk

import (
	"context"
	"fmt"
	"slices"
)

// UseACL returns a view of conn whose creates (Create, and CreateACL or
// the CreateOps of Multi with a nil ACL) use acl instead of the
// connection's own. Recipes use it for their WithACL option. With no acl it
// returns conn. An acl that fails ValidateACL is refused with an error
// matching ErrInvalidOption (so ErrBadArguments and
// zkrecipes.ErrInvalidOption).
func UseACL(conn Conn, acl ...ACL) (Conn, error) {
	if len(acl) == 0 {
		return conn, nil
	}
	if err := ValidateACL(acl); err != nil {
		return nil, err
	}
	acl = slices.Clone(acl)
	return &aclView{Conn: conn, pick: func(string) []ACL { return acl }}, nil
}

// aclView creates the nodes that are given no ACL with pick's ACL for
// their path (nil: the underlying Conn's own).
type aclView struct {
	Conn
	pick func(path string) []ACL
}

func (v *aclView) Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error) {
	return v.CreateACL(ctx, path, data, mode, nil)
}

func (v *aclView) CreateACL(ctx context.Context, path string, data []byte, mode CreateMode, acl []ACL) (string, error) {
	if acl == nil {
		var err error
		if acl, err = v.aclFor(path); err != nil {
			return "", err
		}
	}
	return v.Conn.CreateACL(ctx, path, data, mode, acl)
}

func (v *aclView) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	withACL := make([]Op, len(ops))
	for i, op := range ops {
		withACL[i] = op
		if c, ok := op.(*CreateOp); ok && c != nil && c.ACL == nil {
			acl, err := v.aclFor(c.Path)
			if err != nil {
				return nil, fmt.Errorf("op %d: %w", i, err)
			}
			cp := *c
			cp.ACL = acl
			withACL[i] = &cp
		}
	}
	return v.Conn.Multi(ctx, withACL...)
}

// aclFor is pick's ACL for path, refused before anything is sent when it
// fails ValidateACL.
func (v *aclView) aclFor(path string) ([]ACL, error) {
	acl := v.pick(path)
	if acl == nil {
		return nil, nil
	}
	if err := ValidateACL(acl); err != nil {
		return nil, fmt.Errorf("the ACL for %s: %w", path, err)
	}
	return acl, nil
}

// Unwrap returns the Conn the view was made from.
func (v *aclView) Unwrap() Conn { return v.Conn }

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
