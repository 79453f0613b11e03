package queue

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
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

// removeOf is the item out removes ("" when it removes none, or several).
func removeOf(out runtime.Output[Command]) (removeItem, bool) {
	rm := commands[removeItem](out)
	if len(rm) != 1 {
		return removeItem{}, false
	}
	return rm[0], true
}

// A consumer does not go back: it lost lane 1's head (qn-0000000001) and
// took lane 2's items, up to qn-0000000010. A fresh listing then shows
// only lane 1: qn-0000000009, behind what it took, and qn-0000000017 and
// qn-0000000025 after it. It steals the lane from its mark, taking
// qn-0000000017 and qn-0000000025, and leaves qn-0000000009 to the lane's
// holder. Once nothing else is left it waits for that holder; the item
// still there when the wait ends (its holder gone) is taken.
func TestTranscriptLaneStolenFromOurMark(t *testing.T) {
	tr := newTranscript(t)
	take := func(req uint64, want string) {
		t.Helper()
		out := tr.step(takeCall{Req: req, Kind: kindTake})
		rm, ok := removeOf(out)
		if !ok || rm.Name != want {
			t.Fatalf("take %d: commands %v; want %s removed", req, out.Commands, want)
		}
		tr.step(removed{Cmd: rm.Cmd, Name: rm.Name})
	}
	tr.step(takeCall{Req: 1, Kind: kindTake})
	out := tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001", "qn-0000000002", "qn-0000000009", "qn-0000000010"}, Watched: true})
	for _, r := range commands[readItem](out) {
		tr.step(dataRead{Cmd: r.Cmd, Name: r.Name, Data: []byte(r.Name[11:])})
	}
	tr.step(removed{Cmd: 6, Name: "qn-0000000001", Err: zk.ErrNoNode}) // taken by the lane's holder
	tr.step(removed{Cmd: 7, Name: "qn-0000000002"})
	take(2, "qn-0000000010")
	tr.step(childrenChanged{Cmd: 1})
	out = tr.step(takeCall{Req: 3, Kind: kindTake})
	list := commands[listItems](out)
	if len(list) != 1 {
		t.Fatalf("with only an avoided item cached, commands %v; want a listing", out.Commands)
	}
	out = tr.step(listed{Cmd: list[0].Cmd, Children: []string{"qn-0000000009", "qn-0000000017", "qn-0000000025"}, Watched: true})
	reads := commands[readItem](out)
	if len(reads) != 2 || reads[0].Name != "qn-0000000017" || reads[1].Name != "qn-0000000025" {
		t.Fatalf("after the listing, reads %v; want qn-0000000017 and qn-0000000025, not qn-0000000009", reads)
	}
	out = tr.step(dataRead{Cmd: reads[0].Cmd, Name: reads[0].Name, Data: []byte("17")})
	tr.step(dataRead{Cmd: reads[1].Cmd, Name: reads[1].Name, Data: []byte("25")})
	rm, ok := removeOf(out)
	if !ok || rm.Name != "qn-0000000017" {
		t.Fatalf("take 3: commands %v; want qn-0000000017 removed", out.Commands)
	}
	tr.step(removed{Cmd: rm.Cmd, Name: rm.Name})
	take(4, "qn-0000000025")
	out = tr.step(takeCall{Req: 5, Kind: kindTake})
	w := commands[wait](out)
	if len(w) != 1 || len(commands[removeItem](out))+len(commands[readItem](out)) != 0 {
		t.Fatalf("with only qn-0000000009 left, commands %v; want a wait", out.Commands)
	}
	out = tr.step(waited{Cmd: w[0].Cmd})
	rm, ok = removeOf(out)
	if !ok || rm.Name != "qn-0000000009" {
		t.Fatalf("after the wait, commands %v; want qn-0000000009 removed", out.Commands)
	}
	tr.step(removed{Cmd: rm.Cmd, Name: rm.Name})
	tr.Check("lane_stolen_from_our_mark")
}

// What a consumer believes of a lane follows its races: a race lost in a
// lane makes it avoid the lane from that item on, but not a lost race
// answered late, on an item before one it has taken there since; and an
// item won after the race it lost makes the lane its own again.
func TestLaneBeliefsFollowTheRaces(t *testing.T) {
	m, err := NewMachine(Config{Path: "/app/q", SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	item := func(seq uint32) *entry {
		return &entry{itemName: itemName{name: fmt.Sprintf("qn-%010d", seq), seq: seq}}
	}
	m.won(item(9))
	m.lostRace(item(1)) // late: we took qn-0000000009 since
	if m.avoided(item(17)) {
		t.Fatal("a race lost on qn-0000000001, after qn-0000000009 was won, made us avoid lane 1")
	}
	m.lostRace(item(17))
	m.lostRace(item(17))
	if !m.avoided(item(25)) || m.avoided(item(9)) {
		t.Fatal("after losing qn-0000000017: want lane 1 avoided from it on, and only from it")
	}
	m.won(item(25)) // its write was in flight, and landed
	if m.avoided(item(33)) {
		t.Fatal("after winning qn-0000000025, lane 1 is still avoided")
	}
	if !m.behind(item(17)) || m.behind(item(26)) || m.behind(&entry{itemName: itemName{seq: 17}, again: true}) {
		t.Fatal("behind our mark (qn-0000000025): want qn-0000000017, not qn-0000000026 nor an item that came again")
	}
}

// A poll does not wait for the holder of an item behind our mark: with
// nothing else left, it takes it at once (an empty answer would be false).
func TestPollGoesBackAtOnce(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001", "qn-0000000002", "qn-0000000009", "qn-0000000010"}, Watched: true})
	for i, name := range []string{"qn-0000000001", "qn-0000000002", "qn-0000000009", "qn-0000000010"} {
		tr.step(dataRead{Cmd: uint64(2 + i), Name: name, Data: []byte(name[11:])})
	}
	tr.step(removed{Cmd: 6, Name: "qn-0000000001", Err: zk.ErrNoNode})
	tr.step(removed{Cmd: 7, Name: "qn-0000000002"})
	tr.step(takeCall{Req: 2, Kind: kindTake})
	tr.step(removed{Cmd: 8, Name: "qn-0000000010"})
	out := tr.step(takeCall{Req: 3, Kind: kindPoll})
	rm, ok := removeOf(out)
	if !ok || rm.Name != "qn-0000000009" || len(commands[wait](out)) != 0 {
		t.Fatalf("poll: commands %v; want qn-0000000009 removed, with no wait", out.Commands)
	}
}

// A consumer's mark is kept per priority: having taken an item of
// priority 5 and then one of priority 1, it still does not go back in
// priority 5.
func TestMarkPerPriority(t *testing.T) {
	m, err := NewMachine(Config{Path: "/app/q", SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	item := func(prio int64, seq uint32) *entry { return &entry{itemName: itemName{prio: prio, seq: seq}} }
	m.won(item(5, 20))
	m.won(item(1, 30))
	if !m.behind(item(5, 10)) || m.behind(item(5, 40)) || !m.behind(item(1, 25)) || m.behind(item(3, 1)) {
		t.Fatal("after priority 5's item 20 and priority 1's item 30: want 5/10 and 1/25 behind, not 5/40 nor 3/1")
	}
	m.won(item(5, 40))
	if !m.behind(item(1, 25)) || !m.behind(item(5, 30)) {
		t.Fatal("after priority 5's item 40: want 1/25 and 5/30 behind")
	}
}
