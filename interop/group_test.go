package interop

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// membersSpec is a group's members as CuratorGroup prints them: sorted
// "id=payload" joined by ",", "-" for none.
func membersSpec(ms map[string][]byte) string {
	var s []string
	for _, id := range slices.Sorted(maps.Keys(ms)) {
		s = append(s, id+"="+string(ms[id]))
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// Curator's GroupMember and ours in one group, both ways: each sees the
// other join, change its data and leave (Curator's getCurrentMembers, our
// Watch's Members and events); our Join of the id Curator holds is
// ErrMemberExists and leaves Curator's node as it was; nothing is left.
func TestGroupWithCurator(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const path = "/interop/members"
	cur := startJava(t, t0, "curator", "CuratorGroup.java", srv.Addr(), path, "java-1")
	t.Logf("Curator GroupMember(%s, java-1), session %s, up in %v", path, cur.session, time.Since(t0).Round(time.Millisecond))

	w := connect(t, srv.Addr())
	g, err := group.Watch(w, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	sub := g.Subscribe()
	defer sub.Close()
	waitMembers := func(want string) {
		t.Helper()
		deadline := time.After(step)
		for membersSpec(g.Members()) != want {
			select {
			case <-sub.C:
			case <-deadline:
				t.Fatalf("our Watch shows %s, want %s", membersSpec(g.Members()), want)
			}
		}
	}

	cur.ask("join j1 10000", "JOINED")
	waitMembers("java-1=j1")
	c := connect(t, srv.Addr())
	m, err := group.Join(ctx, c, path, "go-1", []byte("g1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	waitMembers("go-1=g1,java-1=j1")
	cur.send("await go-1=g1,java-1=j1 10000")
	cur.await("MATCH")

	if err := m.SetData(ctx, []byte("g2")); err != nil {
		t.Fatal(err)
	}
	cur.send("await go-1=g2,java-1=j1 10000")
	cur.await("MATCH")
	cur.ask("set j2", "SET")
	waitMembers("go-1=g2,java-1=j2")

	// Curator's id is Curator's.
	other := connect(t, srv.Addr())
	if _, err := group.Join(ctx, other, path, "java-1", []byte("mine")); !errors.Is(err, group.ErrMemberExists) {
		t.Fatalf("our Join of Curator's id: %v, want ErrMemberExists", err)
	}
	d, st, err := c.Get(ctx, path+"/java-1")
	if err != nil || string(d) != "j2" || fmt.Sprintf("0x%x", uint64(st.EphemeralOwner)) != cur.session {
		t.Errorf("Curator's node after our refused Join: %q owner %#x (%v), want j2 on %s", d, st.EphemeralOwner, err, cur.session)
	}

	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	cur.send("await java-1=j2 10000")
	cur.await("MATCH")
	cur.ask("leave", "LEFT")
	waitMembers("-")
	if kids, _, err := c.Children(ctx, path); err == nil && len(kids) > 0 {
		t.Errorf("left in the group: %q", kids)
	} else if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
}
