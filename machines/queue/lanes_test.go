package queue

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// laneItems names n items of one lane (sequence modulo 8), from seq on.
func laneItems(seq, n int) []string {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("qn-%010d", seq+8*i))
	}
	return names
}

// A consumer with nothing left it does not avoid steals a lane from its
// oldest item, and does not give it up at the next race it loses there:
// lane 1's head was taken by another consumer, a fresh listing shows the
// lane's other items, the take loses qn-0000000009 to that consumer too,
// and takes qn-0000000017 without listing again (though the children
// changed since).
func TestTranscriptStolenLaneKeptThroughALostRace(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	reads := commands[readItem](tr.step(listed{Cmd: 1, Children: laneItems(1, 10), Watched: true}))
	if len(reads) < 3 || reads[1].Name != "qn-0000000009" || reads[2].Name != "qn-0000000017" {
		t.Fatalf("after the listing, reads %v; want qn-0000000001, qn-0000000009 and qn-0000000017 first", reads)
	}
	rm := commands[removeItem](tr.step(dataRead{Cmd: reads[0].Cmd, Name: "qn-0000000001", Data: []byte("a")}))
	tr.step(childrenChanged{Cmd: 1})
	list := commands[listItems](tr.step(removed{Cmd: rm[0].Cmd, Name: "qn-0000000001", Err: zk.ErrNoNode}))
	if len(list) != 1 {
		t.Fatal("after the lost race, with the children changed, no listing")
	}
	tr.step(listed{Cmd: list[0].Cmd, Children: laneItems(9, 9), Watched: true})
	tr.step(childrenChanged{Cmd: list[0].Cmd}) // the other consumer's deletes
	rm = commands[removeItem](tr.step(dataRead{Cmd: reads[1].Cmd, Name: "qn-0000000009", Data: []byte("b")}))
	if len(rm) != 1 || rm[0].Name != "qn-0000000009" {
		t.Fatalf("after the listing, removes %v; want qn-0000000009", rm)
	}
	tr.step(dataRead{Cmd: reads[2].Cmd, Name: "qn-0000000017", Data: []byte("c")})
	out := tr.step(removed{Cmd: rm[0].Cmd, Name: "qn-0000000009", Err: zk.ErrNoNode})
	if l := commands[listItems](out); len(l) != 0 {
		t.Fatalf("the thief lists again after one lost race: %v", out.Commands)
	}
	rm = commands[removeItem](out)
	if len(rm) != 1 || rm[0].Name != "qn-0000000017" {
		t.Fatalf("after losing qn-0000000009, removes %v; want qn-0000000017", rm)
	}
	out = tr.step(removed{Cmd: rm[0].Cmd, Name: "qn-0000000017"})
	if r, ok := replied(out, 1); !ok || r.Value.(taken).Name != "qn-0000000017" {
		t.Fatalf("take: %+v, want qn-0000000017", r)
	}
	tr.Check("stolen_lane_kept_through_a_lost_race")
}

// The consumer a lane was stolen from finds the stolen part gone when it
// reads ahead into it (qn-0000000017 here): it avoids the lane from there
// on, but still takes the lane's items before it, in order, before the
// next lane's.
func TestTranscriptStolenRestLeftByItsHolder(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001", "qn-0000000009", "qn-0000000010", "qn-0000000017", "qn-0000000018", "qn-0000000025"}, Watched: true})
	tr.step(dataRead{Cmd: 5, Name: "qn-0000000017", Err: zk.ErrNoNode})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000009", Data: []byte("b")})
	tr.step(dataRead{Cmd: 4, Name: "qn-0000000010", Data: []byte("c")})
	tr.step(dataRead{Cmd: 2, Name: "qn-0000000001", Data: []byte("a")})
	tr.step(removed{Cmd: 7, Name: "qn-0000000001"})
	out := tr.step(takeCall{Req: 2, Kind: kindTake})
	if rm := commands[removeItem](out); len(rm) != 1 || rm[0].Name != "qn-0000000009" {
		t.Fatalf("the second take removes %v; want qn-0000000009, before the stolen part", rm)
	}
	tr.step(removed{Cmd: 8, Name: "qn-0000000009"})
	out = tr.step(takeCall{Req: 3, Kind: kindTake})
	if rm := commands[removeItem](out); len(rm) != 1 || rm[0].Name != "qn-0000000010" {
		t.Fatalf("the third take removes %v; want qn-0000000010", rm)
	}
	tr.Check("stolen_rest_left_by_its_holder")
}
