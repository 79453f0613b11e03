package zk

import (
	"fmt"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

func TestTrackerMapping(t *testing.T) {
	type step struct {
		s  gozk.State
		id int64
	}
	hs := func(id int64) step { return step{gozk.StateHasSession, id} }
	var (
		connecting   = step{s: gozk.StateConnecting}
		tcp          = step{s: gozk.StateConnected}
		disconnected = step{s: gozk.StateDisconnected}
		expired      = step{s: gozk.StateExpired}
	)
	for _, tc := range []struct {
		name  string
		steps []step
		want  string // the events, as STATE(id)
		state SessionState
		sid   int64
	}{
		{"first session", []step{connecting, tcp, hs(1)}, "[CONNECTED(1)]", StateConnected, 1},
		{"failed dials before the first session", []step{connecting, disconnected, connecting, tcp, hs(1)}, "[CONNECTED(1)]", StateConnected, 1},
		{"cut, same session back", []step{hs(1), disconnected, connecting, tcp, hs(1)}, "[CONNECTED(1) SUSPENDED(1) RECONNECTED(1)]", StateReconnected, 1},
		{"repeated disconnects are one SUSPENDED", []step{hs(1), disconnected, connecting, disconnected, connecting, disconnected, tcp, hs(1)}, "[CONNECTED(1) SUSPENDED(1) RECONNECTED(1)]", StateReconnected, 1},
		{"two cuts", []step{hs(1), disconnected, hs(1), disconnected, hs(1)}, "[CONNECTED(1) SUSPENDED(1) RECONNECTED(1) SUSPENDED(1) RECONNECTED(1)]", StateReconnected, 1},
		// go-zookeeper on expiry: Expired, Disconnected, dial, HasSession(new id).
		{"expiry, then a new session", []step{hs(1), disconnected, connecting, tcp, expired, disconnected, connecting, tcp, hs(2)}, "[CONNECTED(1) SUSPENDED(1) LOST(1) CONNECTED(2)]", StateConnected, 2},
		{"expired, no new session yet", []step{hs(1), disconnected, tcp, expired, disconnected, connecting}, "[CONNECTED(1) SUSPENDED(1) LOST(1)]", StateLost, 0},
		{"new id without Expired is LOST too", []step{hs(1), disconnected, hs(2)}, "[CONNECTED(1) SUSPENDED(1) LOST(1) CONNECTED(2)]", StateConnected, 2},
		{"cut after a replaced session", []step{hs(1), disconnected, expired, hs(2), disconnected, hs(2)}, "[CONNECTED(1) SUSPENDED(1) LOST(1) CONNECTED(2) SUSPENDED(2) RECONNECTED(2)]", StateReconnected, 2},
		{"nothing before a session", []step{connecting, disconnected, expired}, "[]", StateConnecting, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr tracker
			var got []string
			now := time.Unix(1, 0)
			for _, st := range tc.steps {
				for _, ev := range tr.apply(st.s, st.id, now) {
					if !ev.Time.Equal(now) {
						t.Fatalf("event time %v, want %v", ev.Time, now)
					}
					got = append(got, fmt.Sprintf("%v(%d)", ev.State, ev.SessionID))
				}
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Fatalf("events %s, want %s", s, tc.want)
			}
			if tr.state != tc.state || tr.sid != tc.sid {
				t.Fatalf("ends in %v with session %d, want %v with %d", tr.state, tr.sid, tc.state, tc.sid)
			}
		})
	}
}

func TestNilConn(t *testing.T) {
	var c *client
	ctx := t.Context()
	if _, _, err := c.Get(ctx, "/a"); err != ErrClosed {
		t.Fatalf("Get on nil conn: %v, want ErrClosed", err)
	}
	if _, _, err := c.Get(ctx, "a"); err == nil || err == ErrClosed {
		t.Fatalf("Get with a bad path on nil conn: %v, want ErrInvalidPath first", err)
	}
	if _, err := c.Create(ctx, "/a", nil, ModeContainer); err != ErrClosed {
		t.Fatalf("Create on nil conn: %v, want ErrClosed", err)
	}
	if _, err := c.Multi(ctx, &CheckOp{Path: "/a"}); err != ErrClosed {
		t.Fatalf("Multi on nil conn: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != ErrClosed {
		t.Fatalf("Close on nil conn: %v, want ErrClosed", err)
	}
	if c.State() != StateClosed || c.SessionID() != 0 {
		t.Fatalf("nil conn: state %v, session %d", c.State(), c.SessionID())
	}
	c.Subscribe(func(SessionEvent) { t.Error("event on a nil conn") })()
}

func TestContainerFallbackIsRemembered(t *testing.T) {
	c := &client{}
	var calls []bool
	unimplemented := func(container bool) (string, error) {
		calls = append(calls, container)
		if container {
			return "", mapErr(fmt.Errorf("unknown error: -6"))
		}
		return "/a", nil
	}
	for range 2 {
		if p, err := c.createContainer(unimplemented); p != "/a" || err != nil {
			t.Fatalf("createContainer = %q, %v", p, err)
		}
	}
	if fmt.Sprint(calls) != "[true false false]" {
		t.Fatalf("creates (container?) %v, want [true false false]: one try, then persistent for good", calls)
	}

	c, calls = &client{}, nil
	exists := func(container bool) (string, error) {
		calls = append(calls, container)
		return "", ErrNodeExists
	}
	if _, err := c.createContainer(exists); err != ErrNodeExists {
		t.Fatalf("createContainer = %v, want ErrNodeExists unchanged", err)
	}
	if fmt.Sprint(calls) != "[true]" || c.noContainers.Load() {
		t.Fatalf("other errors must not switch to persistent nodes: calls %v", calls)
	}
}
