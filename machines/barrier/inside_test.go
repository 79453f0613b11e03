package barrier

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// The member whose arrival completed the count made its node and ready
// in one multi: both have one creation zxid, and it is a member of the
// round in progress as much as those who came before it.
func TestInsideCountsTheMemberThatMadeReady(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		const path = "/barrier/inside"
		c := tg.Connect(t)
		d, err := NewDouble(c, path, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.createPath(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(ctx, path+"/a-1", nil, zk.ModeEphemeral); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Multi(ctx, &zk.CreateOp{Path: path + "/b-1", Mode: zk.ModeEphemeral},
			&zk.CreateOp{Path: path + "/" + ReadyName, Mode: zk.ModePersistent}); err != nil {
			t.Fatal(err)
		}
		st, _, err := c.Exists(ctx, path+"/"+ReadyName)
		if err != nil {
			t.Fatal(err)
		}
		in, err := d.inside(ctx, direct, []string{"a-1", "b-1"}, st.Czxid)
		if err != nil || !slices.Equal(in, []string{"a-1", "b-1"}) {
			t.Fatalf("inside = %v, %v; want both members", in, err)
		}
		for _, n := range []string{"a-1", "b-1", ReadyName} {
			if err := c.Delete(ctx, path+"/"+n, zk.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
	})
}
