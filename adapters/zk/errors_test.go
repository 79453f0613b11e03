package zk

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	gozk "github.com/go-zookeeper/zk"
)

func TestMapErr(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   error
		want error
	}{
		{"no node", gozk.ErrNoNode, ErrNoNode},
		{"node exists", gozk.ErrNodeExists, ErrNodeExists},
		{"not empty", gozk.ErrNotEmpty, ErrNotEmpty},
		{"bad version", gozk.ErrBadVersion, ErrBadVersion},
		{"no children for ephemerals", gozk.ErrNoChildrenForEphemerals, ErrNoChildrenForEphemerals},
		{"bad arguments", gozk.ErrBadArguments, ErrBadArguments},
		{"invalid acl", gozk.ErrInvalidACL, ErrBadArguments},
		{"invalid flags, wrapped", fmt.Errorf("Create with TTL flag disallowed: %w", gozk.ErrInvalidFlags), ErrBadArguments},
		{"invalid path", gozk.ErrInvalidPath, ErrInvalidPath},
		{"no auth", gozk.ErrNoAuth, ErrNoAuth},
		{"auth failed", gozk.ErrAuthFailed, ErrAuthFailed},
		{"session expired", gozk.ErrSessionExpired, ErrSessionExpired},
		{"connection closed", gozk.ErrConnectionClosed, ErrConnectionLoss},
		{"no server", gozk.ErrNoServer, ErrConnectionLoss},
		{"session moved", gozk.ErrSessionMoved, ErrConnectionLoss},
		{"closing", gozk.ErrClosing, ErrClosed},
		{"runtime inconsistency (-2)", errors.New("unknown error: -2"), ErrRuntimeInconsistency},
		{"connection loss (-4)", errors.New("unknown error: -4"), ErrConnectionLoss},
		{"unimplemented (-6)", errors.New("unknown error: -6"), ErrUnimplemented},
		{"operation timeout (-7)", errors.New("unknown error: -7"), ErrConnectionLoss},
		{"system error (-1)", errors.New("unknown error: -1"), ErrUnexpected},
		{"throttled (-127)", errors.New("unknown error: -127"), ErrUnexpected},
		{"api error", gozk.ErrAPIError, ErrUnexpected},
		{"unknown", gozk.ErrUnknown, ErrUnexpected},
		{"socket write failed", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, ErrConnectionLoss},
		{"socket closed", fmt.Errorf("write: %w", net.ErrClosed), ErrConnectionLoss},
		{"anything else", errors.New("something odd"), ErrUnexpected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mapErr(tc.in)
			if !errors.Is(got, tc.want) {
				t.Fatalf("mapErr(%q) = %q, want errors.Is %q", tc.in, got, tc.want)
			}
			if !strings.Contains(got.Error(), tc.in.Error()) && got.Error() != tc.want.Error() {
				t.Fatalf("mapErr(%q) = %q lost the original text", tc.in, got)
			}
			for _, other := range []error{ErrNoNode, ErrConnectionLoss, ErrClosed, ErrBadArguments, ErrUnexpected} {
				if other != tc.want && errors.Is(got, other) {
					t.Fatalf("mapErr(%q) = %q also matches %q", tc.in, got, other)
				}
			}
		})
	}
	if mapErr(nil) != nil {
		t.Fatal("mapErr(nil) != nil")
	}
	// A request over the client's buffer: the sentinel itself, the text the
	// simulator gives too, and still an ErrBadArguments.
	if got := mapErr(gozk.ErrShortBuffer); got != ErrRequestTooLarge || !errors.Is(got, ErrBadArguments) {
		t.Fatalf("mapErr(gozk.ErrShortBuffer) = %#v, want ErrRequestTooLarge itself", got)
	}
	// Same text: the sentinel itself, no decoration.
	if got := mapErr(gozk.ErrNoNode); got != ErrNoNode {
		t.Fatalf("mapErr(gozk.ErrNoNode) = %#v, want the sentinel itself", got)
	}
	if got := mapErr(errors.New("unknown error: -2")).Error(); !strings.Contains(got, "unknown error: -2") {
		t.Fatalf("original text lost: %q", got)
	}
}

func TestWatchEventMapping(t *testing.T) {
	for _, tc := range []struct {
		in   gozk.Event
		want WatchEvent
	}{
		{gozk.Event{Type: gozk.EventNodeCreated, Path: "/a"}, WatchEvent{Type: EventNodeCreated, Path: "/a"}},
		{gozk.Event{Type: gozk.EventNodeDeleted, Path: "/a"}, WatchEvent{Type: EventNodeDeleted, Path: "/a"}},
		{gozk.Event{Type: gozk.EventNodeDataChanged, Path: "/a"}, WatchEvent{Type: EventNodeDataChanged, Path: "/a"}},
		{gozk.Event{Type: gozk.EventNodeChildrenChanged, Path: "/a"}, WatchEvent{Type: EventNodeChildrenChanged, Path: "/a"}},
		{gozk.Event{Type: gozk.EventNotWatching, Path: "/a", Err: gozk.ErrSessionExpired}, WatchEvent{Type: EventNotWatching, Path: "/a", Err: ErrSessionExpired}},
		{gozk.Event{Type: gozk.EventNotWatching, Path: "/a", Err: gozk.ErrClosing}, WatchEvent{Type: EventNotWatching, Path: "/a", Err: ErrClosed}},
	} {
		if got := watchEvent(tc.in); got != tc.want {
			t.Errorf("watchEvent(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
