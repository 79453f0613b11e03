package testkit

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Target returns the Sim as a Target named "sim". Its Connect closes the
// conn at the end of the test, and HoldNextReply releases at the end of the
// test. Its fault verbs return once c has seen their session events.
// SimOf gets the Sim back from it, for tests that need the simulator's own
// hooks (ReapContainers, SetSequence, LateNextWrite).
func (s *Sim) Target() Target { return simTarget{s} }

type simTarget struct{ s *Sim }

func (simTarget) Name() string { return "sim" }

// SimOf returns the simulator behind tg, and false when tg is not the
// simulator's target (Sim.Target).
func SimOf(tg Target) (*Sim, bool) {
	if st, ok := tg.(simTarget); ok {
		return st.s, true
	}
	return nil, false
}

// Connect opens a simulator session and applies opts with zk.Wrap.
func (tg simTarget) Connect(t testing.TB, opts ...zk.Option) zk.Conn {
	t.Helper()
	raw := tg.s.Connect()
	c, err := zk.Wrap(t.Context(), raw, opts...)
	if err != nil {
		_ = raw.Close()
		t.Fatalf("testkit: zk.Wrap on the simulator: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (tg simTarget) Disconnect(_ testing.TB, c zk.Conn) { tg.s.Disconnect(c) }

func (tg simTarget) Reconnect(_ testing.TB, c zk.Conn) { tg.s.Reconnect(c) }

func (tg simTarget) Expire(_ testing.TB, c zk.Conn) { tg.s.Expire(c) }

func (tg simTarget) LoseNextReply(_ testing.TB, c zk.Conn, op OpKind, pathPrefix string) *ReplyFault {
	return tg.s.LoseNextReply(c, op, pathPrefix)
}

func (tg simTarget) HoldNextReply(t testing.TB, c zk.Conn, op OpKind, pathPrefix string) *ReplyFault {
	f := tg.s.HoldNextReply(c, op, pathPrefix)
	t.Cleanup(f.Release)
	return f
}
