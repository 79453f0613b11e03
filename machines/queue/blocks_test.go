package queue

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// items names the items of sequence numbers seqs.
func items(seqs ...int) []string {
	var names []string
	for _, seq := range seqs {
		names = append(names, fmt.Sprintf("qn-%010d", seq))
	}
	return names
}

// span is the sequence numbers from, from+1, ..., to.
func span(from, to int) []int {
	var seqs []int
	for seq := from; seq <= to; seq++ {
		seqs = append(seqs, seq)
	}
	return seqs
}

// removeOf is out's one removeItem.
func removeOf(out runtime.Output[command]) (removeItem, bool) {
	rm := commands[removeItem](out)
	if len(rm) != 1 {
		return removeItem{}, false
	}
	return rm[0], true
}

// answerReads answers out's reads with each item's sequence number as its
// data, and returns the removeItem sent meanwhile, if one.
func (tr *transcript) answerReads(out runtime.Output[command]) (removeItem, bool) {
	rm, ok := removeOf(out)
	for _, r := range commands[readItem](out) {
		if next, found := removeOf(tr.step(dataRead{Cmd: r.Cmd, Name: r.Name, Data: []byte(r.Name[11:])})); found {
			rm, ok = next, true
		}
	}
	return rm, ok
}

// takeWant has take req remove want (reading what it asks first), and
// answers the remove.
func (tr *transcript) takeWant(t *testing.T, req uint64, want string) {
	t.Helper()
	rm, ok := tr.answerReads(tr.step(takeCall{Req: req, Kind: kindTake}))
	if !ok || rm.Name != want {
		t.Fatalf("take %d removes %+v; want %s", req, rm, want)
	}
	if r, ok := replied(tr.step(removed{Cmd: rm.Cmd, Name: rm.Name}), req); !ok || r.Value.(taken).Name != want {
		t.Fatalf("take %d: %+v, want %s", req, r, want)
	}
}

// relistAndWait answers the listing out asks for with children, and
// returns the wait of d the consumer then starts, with nothing removed.
func (tr *transcript) relistAndWait(t *testing.T, out runtime.Output[command], children []string, d time.Duration) wait {
	t.Helper()
	list := commands[listItems](out)
	if len(list) != 1 {
		t.Fatalf("commands %v; want a listing", out.Commands)
	}
	out = tr.step(listed{Cmd: list[0].Cmd, Children: children, Watched: true})
	w := commands[wait](out)
	if len(w) != 1 || w[0].For != d || len(commands[removeItem](out)) != 0 {
		t.Fatalf("after a listing of %v, commands %v; want a wait of %v", children, out.Commands, d)
	}
	return w[0]
}

// A consumer that loses the head's race avoids the head's block (sequence
// numbers 0 to 31) and takes the next block's items: qn-0000000002 is
// passed over for qn-0000000033, then qn-0000000034.
func TestTranscriptHeadTakenByAnother(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	rm, _ := tr.answerReads(tr.step(listed{Cmd: 1, Children: items(1, 2, 33, 34), Watched: true}))
	out := tr.step(removed{Cmd: rm.Cmd, Name: "qn-0000000001", Err: zk.ErrNoNode})
	if rm, ok := removeOf(out); !ok || rm.Name != "qn-0000000033" {
		t.Fatalf("after the lost race, commands %v; want qn-0000000033 removed", out.Commands)
	} else if r, ok := replied(tr.step(removed{Cmd: rm.Cmd, Name: rm.Name}), 1); !ok || r.Value.(taken).Name != "qn-0000000033" {
		t.Fatalf("take 1: %+v, want qn-0000000033", r)
	}
	tr.takeWant(t, 2, "qn-0000000034")
	tr.Check("head_taken_by_another")
}

// A consumer left with only a block it avoids, with stealMin items or
// more after its mark, steals the block's upper half: it lost
// qn-0000000001 and takes qn-0000000007 (the middle of qn-0000000002 to
// qn-0000000012) and after, in order, leaving the lower half to the
// block's holder.
func TestTranscriptBlockHalfStolen(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	rm, _ := tr.answerReads(tr.step(listed{Cmd: 1, Children: items(span(1, 12)...), Watched: true}))
	rm, ok := tr.answerReads(tr.step(removed{Cmd: rm.Cmd, Name: "qn-0000000001", Err: zk.ErrNoNode}))
	if !ok || rm.Name != "qn-0000000007" {
		t.Fatalf("after the lost race, removes %+v; want qn-0000000007", rm)
	}
	tr.step(removed{Cmd: rm.Cmd, Name: rm.Name})
	tr.takeWant(t, 2, "qn-0000000008")
	tr.takeWant(t, 3, "qn-0000000009")
	tr.Check("block_half_stolen")
}

// The holder of a block whose upper half was stolen finds the stolen part
// gone when it reads ahead into it (qn-0000000005 here): it avoids the
// block from there on, but still takes the items before it, in order,
// then moves to the next block.
func TestTranscriptHolderKeepsTheLowerHalf(t *testing.T) {
	tr := newTranscript(t)
	reads := map[string]uint64{} // reads sent and not answered
	step := func(in input) runtime.Output[command] {
		out := tr.step(in)
		for _, r := range commands[readItem](out) {
			reads[r.Name] = r.Cmd
		}
		return out
	}
	answer := func(seq int, err error) runtime.Output[command] {
		name := items(seq)[0]
		in := dataRead{Cmd: reads[name], Name: name, Data: []byte(name[11:]), Err: err}
		if err != nil {
			in.Data = nil
		}
		delete(reads, name)
		return step(in)
	}
	take := func(req uint64, seq int, stolen ...int) {
		t.Helper()
		out := step(takeCall{Req: req, Kind: kindTake})
		rm, ok := removeOf(out)
		for _, s := range stolen {
			if o := answer(s, zk.ErrNoNode); !ok {
				rm, ok = removeOf(o)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(reads)) {
			if !ok {
				rm, ok = removeOf(answer(nodeSeq(name), nil))
			}
		}
		if !ok || rm.Name != items(seq)[0] {
			t.Fatalf("take %d removes %+v; want qn-%010d", req, rm, seq)
		}
		step(removed{Cmd: rm.Cmd, Name: rm.Name})
	}
	step(takeCall{Req: 1, Kind: kindTake})
	step(listed{Cmd: 1, Children: items(1, 2, 3, 4, 5, 6, 33), Watched: true})
	rm, _ := removeOf(answer(1, nil))
	for _, seq := range []int{2, 3, 4} {
		answer(seq, nil)
	}
	step(removed{Cmd: rm.Cmd, Name: rm.Name})
	take(2, 2)
	take(3, 3)
	take(4, 4)
	for _, name := range slices.Sorted(maps.Keys(reads)) { // the next reads ahead: qn-0000000005 is gone
		var err error
		if name == "qn-0000000005" {
			err = zk.ErrNoNode
		}
		answer(nodeSeq(name), err)
	}
	take(5, 33) // not qn-0000000006: the thief's
	tr.Check("holder_keeps_the_lower_half")
}

// nodeSeq is the sequence number ending an item's name.
func nodeSeq(name string) int {
	var seq int
	fmt.Sscanf(name[len(name)-10:], "%d", &seq)
	return seq
}

// A consumer with nothing left but a few items of a block it avoids
// (fewer than stealMin) waits waitThief for the block's holder, then takes
// the oldest: it keeps its order, and the holder, if alive, had its time.
func TestTranscriptSmallRestTakenAfterAWait(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	rm, _ := tr.answerReads(tr.step(listed{Cmd: 1, Children: items(1, 9, 17), Watched: true}))
	tr.step(childrenChanged{Cmd: 1})
	// After the lost race, with the children changed, a listing: only
	// qn-0000000009 and qn-0000000017 are left, in the block lost.
	out := tr.step(removed{Cmd: rm.Cmd, Name: "qn-0000000001", Err: zk.ErrNoNode})
	w := tr.relistAndWait(t, out, items(9, 17), waitThief)
	rm, ok := removeOf(tr.step(waited{Cmd: w.Cmd}))
	if !ok || rm.Name != "qn-0000000009" {
		t.Fatalf("after the wait, removes %+v; want qn-0000000009", rm)
	}
	tr.step(removed{Cmd: rm.Cmd, Name: rm.Name})
	tr.Check("small_rest_taken_after_a_wait")
}

// A consumer does not go back: it lost qn-0000000001 and took the next
// block's qn-0000000033 and qn-0000000034. A fresh listing then shows only
// qn-0000000009 and qn-0000000010, behind its mark. Its holder has
// waitHolder from the time qn-0000000009 became the oldest (see stuck);
// an item still there when that wait ends has no holder taking it, and
// the consumer takes it, and the rest of its block after it without
// waiting again.
func TestTranscriptBlockBehindTakenAfterTheHolderWait(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	rm, _ := tr.answerReads(tr.step(listed{Cmd: 1, Children: items(1, 9, 10, 33, 34), Watched: true}))
	rm, _ = tr.answerReads(tr.step(removed{Cmd: rm.Cmd, Name: "qn-0000000001", Err: zk.ErrNoNode}))
	tr.step(removed{Cmd: rm.Cmd, Name: "qn-0000000033"})
	tr.takeWant(t, 2, "qn-0000000034")
	tr.step(childrenChanged{Cmd: 1})
	// Only items behind the mark cached: a listing, and nothing taken.
	out := tr.step(takeCall{Req: 3, Kind: kindTake})
	list := commands[listItems](out)
	if len(list) != 1 {
		t.Fatalf("commands %v; want a listing", out.Commands)
	}
	if out := tr.step(listed{Cmd: list[0].Cmd, Children: items(9, 10), Watched: true}); len(commands[removeItem](out)) != 0 {
		t.Fatalf("after a listing of items behind the mark, commands %v; want none removed before the wait", out.Commands)
	}
	w := tr.lastWait(t, waitHolder) // started when qn-0000000009 became the oldest
	rm, ok := tr.answerReads(tr.step(waited{Cmd: w.Cmd}))
	if !ok || rm.Name != "qn-0000000009" {
		t.Fatalf("after the wait, removes %+v; want qn-0000000009", rm)
	}
	tr.step(removed{Cmd: rm.Cmd, Name: rm.Name})
	tr.takeWant(t, 4, "qn-0000000010")
	tr.Check("block_behind_taken_after_the_holder_wait")
}

// A poll does not wait for a holder: with nothing else left, it takes the
// item behind our mark at once (an empty answer would be false).
func TestPollGoesBackAtOnce(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	rm, _ := tr.answerReads(tr.step(listed{Cmd: 1, Children: items(1, 9, 33), Watched: true}))
	rm, _ = tr.answerReads(tr.step(removed{Cmd: rm.Cmd, Name: "qn-0000000001", Err: zk.ErrNoNode}))
	tr.step(removed{Cmd: rm.Cmd, Name: "qn-0000000033"})
	out := tr.step(takeCall{Req: 2, Kind: kindPoll})
	rm, ok := removeOf(out)
	if !ok || rm.Name != "qn-0000000009" || len(commands[wait](out)) != 0 {
		t.Fatalf("poll: commands %v; want qn-0000000009 removed, with no wait", out.Commands)
	}
}

// What a consumer believes of a block follows its races: a race lost in a
// block makes it avoid the block from that item on, but not a lost race
// answered late, on an item before its mark; an item won in the part it
// avoids makes the block its own; a stolen upper half is not avoided, and
// a race lost there gives the block up again.
func TestBlockBeliefsFollowTheRaces(t *testing.T) {
	m, err := newMachine(config{Path: "/app/q", SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	item := func(seq uint32) *entry {
		return &entry{itemName: itemName{name: fmt.Sprintf("qn-%010d", seq), seq: seq}}
	}
	m.won(item(9))
	m.lostRace(item(1)) // late: we took qn-0000000009 since
	if m.avoided(item(17)) {
		t.Fatal("a race lost on qn-0000000001, after qn-0000000009 was won, made us avoid block 0")
	}
	m.lostRace(item(17))
	if !m.avoided(item(25)) || m.avoided(item(12)) || m.avoided(item(33)) {
		t.Fatal("after losing qn-0000000017: want block 0 avoided from it on, and only block 0")
	}
	m.won(item(18)) // its write was in flight, and landed
	if m.avoided(item(25)) {
		t.Fatal("after winning qn-0000000018, block 0 is still avoided")
	}
	m.lostRace(item(40))
	if e := m.stealHalf([]*entry{item(41), item(42), item(43), item(44), item(45), item(46), item(47), item(48)}); e == nil || e.seq != 45 {
		t.Fatalf("stealing from 8 items of block 1 gave %v, want qn-0000000045", e)
	}
	if !m.avoided(item(44)) || m.avoided(item(45)) || m.avoided(item(50)) {
		t.Fatal("after stealing block 1 from qn-0000000045: want qn-0000000044 avoided, not qn-0000000045 on")
	}
	m.lostRace(item(50))
	if !m.avoided(item(45)) || !m.avoided(item(50)) {
		t.Fatal("after losing qn-0000000050 in the half we stole: want block 1 avoided from qn-0000000040 on")
	}
	if !m.behind(item(17)) || m.behind(item(19)) || m.behind(&entry{itemName: itemName{seq: 17}, again: true}) {
		t.Fatal("behind our mark (qn-0000000018): want qn-0000000017, not qn-0000000019 nor an item that came again")
	}
}

// A redelivery won far ahead of our block does not move our mark past the
// rest of the block, which no other consumer takes.
func TestRedeliveryLeavesTheMark(t *testing.T) {
	m, err := newMachine(config{Path: "/app/q", SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	m.won(&entry{itemName: itemName{name: "qn-0000000040", seq: 40}})
	m.won(&entry{itemName: itemName{name: "qn-0000000500", seq: 500}, again: true})
	if m.behind(&entry{itemName: itemName{name: "qn-0000000041", seq: 41}}) {
		t.Fatal("after winning a redelivered qn-0000000500, qn-0000000041 is behind our mark")
	}
}

// A consumer's mark is kept per priority: having taken an item of
// priority 5 and then one of priority 1, it still does not go back in
// priority 5.
func TestMarkPerPriority(t *testing.T) {
	m, err := newMachine(config{Path: "/app/q", SessionID: sess})
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

// A race lost while a take or claim of ours of a later item of the same
// block is in flight waits for that write: the block may be ours past the
// lost item. (Believed at once, a second call took from the next block,
// and when our write landed the rest of the block was behind every mark.)
func TestLossWaitsForOurLaterWrite(t *testing.T) {
	m, err := newMachine(config{Path: "/app/q", SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	item := func(seq uint32) *entry {
		return &entry{itemName: itemName{name: fmt.Sprintf("qn-%010d", seq), seq: seq}}
	}
	later := item(5)
	later.busy = true
	m.takers = []*taker{{req: 1, kind: kindClaim, entry: later}}
	m.lostRace(item(4))
	if m.avoided(item(6)) {
		t.Fatal("a race lost on qn-0000000004 while our claim of qn-0000000005 is in flight made us avoid block 0")
	}
	m.lostRace(item(40)) // block 1: nothing of ours in flight there
	if !m.avoided(item(41)) {
		t.Fatal("a race lost in block 1 did not make us avoid it")
	}
	m.takers = nil // our claim lost too
	m.lostRace(item(5))
	if !m.avoided(item(6)) {
		t.Fatal("with no write of ours in flight, a race lost on qn-0000000005 did not make us avoid block 0")
	}
}

// claimWant has TakeItem req claim want, on out, the output that sent the
// claim, and answers the claim and the read behind it: the item had
// claims changes before ours (its cversion, counting ours). It returns the
// output of the read's answer.
func (tr *transcript) claimWant(t *testing.T, out runtime.Output[command], req uint64, want string, claims int32) runtime.Output[command] {
	t.Helper()
	claim, read := commands[claimItem](out), commands[readItem](out)
	if len(claim) != 1 || claim[0].Name != want || len(read) == 0 {
		t.Fatalf("TakeItem %d: commands %v; want a claim of %s and its read", req, out.Commands, want)
	}
	tr.step(claimed{Cmd: claim[0].Cmd, Name: want, Session: sess})
	out = tr.step(dataRead{Cmd: read[len(read)-1].Cmd, Name: want, Data: []byte(want[11:]), Claims: claims})
	if r, ok := replied(out, req); !ok || r.Value.(taken).Name != want {
		t.Fatalf("TakeItem %d: %+v, want %s", req, r, want)
	}
	return out
}

// lastWait is the last wait of d the machine started.
func (tr *transcript) lastWait(t *testing.T, d time.Duration) wait {
	t.Helper()
	for i := len(tr.waits) - 1; i >= 0; i-- {
		if tr.waits[i].For == d {
			return tr.waits[i]
		}
	}
	t.Fatalf("no wait of %v started", d)
	return wait{}
}

// An item behind every consumer's mark that no one takes is taken out of
// order once it has stayed the oldest for waitHolder, even by a consumer
// with items after its mark. Here the consumer lost the race for
// qn-0000000001 (another's claim) and claimed qn-0000000033 and
// qn-0000000034 from the next block; qn-0000000002, behind its mark, came
// again from a claim it never saw (its holder's session ended). After the
// wait the consumer lists the queue (claiming qn-0000000035 meanwhile);
// the listing shows qn-0000000002 still there, and the next TakeItem
// goes back for it (and would take the rest of its block after it): it
// claims it before qn-0000000036, REDELIVERED, as the item's claims count
// says; the one after that goes on at qn-0000000036.
func TestTranscriptStuckItemTakenOutOfOrder(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	out := tr.step(listed{Cmd: 1, Children: items(1, 2, 33, 34, 35), Watched: true})
	claim := commands[claimItem](out)[0]
	out = tr.step(claimed{Cmd: claim.Cmd, Name: claim.Name, Err: zk.ErrNodeExists})
	tr.claimWant(t, out, 1, "qn-0000000033", 1)
	tr.claimWant(t, tr.step(takeCall{Req: 2, Kind: kindClaim}), 2, "qn-0000000034", 1)
	w := tr.lastWait(t, waitHolder) // for qn-0000000002, the oldest, behind our mark
	tr.step(childrenChanged{Cmd: 1})
	tr.step(waited{Cmd: w.Cmd})
	// The wait is over with qn-0000000002 still the oldest: a listing,
	// and meanwhile the TakeItem claims in order.
	out = tr.step(takeCall{Req: 3, Kind: kindClaim})
	list := commands[listItems](out)
	if len(list) != 1 {
		t.Fatalf("TakeItem after the wait, commands %v; want a listing", out.Commands)
	}
	tr.claimWant(t, out, 3, "qn-0000000035", 1)
	tr.step(listed{Cmd: list[0].Cmd, Children: items(1, 2, 36), Watched: true})
	out = tr.claimWant(t, tr.step(takeCall{Req: 4, Kind: kindClaim}), 4, "qn-0000000002", 3)
	if !slices.ContainsFunc(out.Events, func(e events.Event) bool { return e.Type == events.Redelivered }) {
		t.Fatalf("the stuck qn-0000000002 claimed: events %v, want REDELIVERED", out.Events)
	}
	tr.claimWant(t, tr.step(takeCall{Req: 5, Kind: kindClaim}), 5, "qn-0000000036", 1)
	tr.Check("stuck_item_taken_out_of_order")
}

// An ack that finds our claim gone (the session ended, and the reply came
// before the news of it) marks the item as coming again: the next
// TakeItem claims it first, although the consumer's mark is past it.
func TestAckOfAClaimGoneMarksTheItemAgain(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	out := tr.step(listed{Cmd: 1, Children: items(1, 2, 3), Watched: true})
	tr.claimWant(t, out, 1, "qn-0000000001", 1)
	tr.claimWant(t, tr.step(takeCall{Req: 2, Kind: kindClaim}), 2, "qn-0000000002", 1)
	out = tr.step(ackCall{Req: 3, Name: "qn-0000000001", Session: sess})
	end := commands[endClaim](out)
	if len(end) != 1 {
		t.Fatalf("Ack: commands %v; want one endClaim", out.Commands)
	}
	out = tr.step(acked{Cmd: end[0].Cmd, Name: "qn-0000000001", Err: zk.ErrNoNode})
	if r, ok := replied(out, 3); !ok || !errors.Is(r.Err, ErrClaimLost) {
		t.Fatalf("Ack: %+v, want ErrClaimLost", r)
	}
	tr.step(sessionChange{State: zk.StateLost})
	tr.step(sessionChange{State: zk.StateConnected, SessionID: sess})
	out = tr.step(takeCall{Req: 4, Kind: kindClaim})
	if list := commands[listItems](out); len(list) == 1 {
		out = tr.step(listed{Cmd: list[0].Cmd, Children: items(1, 2, 3), Watched: true})
	}
	if claim := commands[claimItem](out); len(claim) != 1 || claim[0].Name != "qn-0000000001" {
		t.Fatalf("TakeItem after the lost claim: commands %v; want a claim of qn-0000000001", out.Commands)
	}
}
