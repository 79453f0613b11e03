package election

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// The follower machine, driven by hand: the first stream starts the reads;
// each change is appended once, in order; a stream asking past the newest
// waits; a slow stream keeps the log from being trimmed past it; a stream
// that leaves lets it go.
func TestFollowerMachine(t *testing.T) {
	f := &follower{waiting: map[uint64]waiter{}, cursors: map[uint64]int{}}
	a, b := Leader{ID: "a", Node: "/e/a"}, Leader{ID: "b", Node: "/e/b"}
	replies := func(in followInput) map[uint64]change {
		out := f.Step(in)
		got := map[uint64]change{}
		for _, r := range out.Replies {
			got[r.Req] = r.Value.(change)
		}
		return got
	}

	out := f.Step(nextChange{req: 1, stream: 1, pos: -1})
	if len(out.Commands) != 1 || len(out.Replies) != 0 {
		t.Fatalf("the first stream: want one read and no answer yet, got %+v", out)
	}
	if got := replies(leaderRead{cmd: 1, leader: a}); got[1] != (change{pos: 0, leader: a}) {
		t.Fatalf("after the first read: %v", got)
	}
	replies(nextChange{req: 2, stream: 1, pos: 1}) // stream 1 waits for the next change
	replies(nextChange{req: 3, stream: 2, pos: -1})
	// The watch fires; the same leader again is no change.
	if out := f.Step(readAgain{cmd: 1}); len(out.Commands) != 1 {
		t.Fatalf("want a read after the watch, got %+v", out)
	}
	if got := replies(leaderRead{cmd: 2, leader: a}); len(got) != 0 {
		t.Fatalf("the same leader delivered again: %v", got)
	}
	f.Step(readAgain{cmd: 2})
	if got := replies(leaderRead{cmd: 3, leader: b}); got[2] != (change{pos: 1, leader: b}) {
		t.Fatalf("the change to b: %v", got)
	}
	// Stream 2 started at a (pos 0) and was answered then; it has not read
	// b yet, so the log keeps both.
	if len(f.log) != 2 {
		t.Fatalf("log %v: a slow stream's entries were trimmed", f.log)
	}
	replies(streamGone{stream: 2})
	replies(nextChange{req: 4, stream: 1, pos: 2})
	if len(f.log) != 1 || f.log[0] != b {
		t.Fatalf("log %v: want only the newest once every stream read the rest", f.log)
	}
	// A closed connection ends the reads.
	f.Step(readAgain{cmd: 3})
	if out := f.Step(leaderRead{cmd: 4, err: zk.ErrClosed}); len(out.Commands) != 0 || !f.stopped {
		t.Fatalf("after ErrClosed: %+v", out)
	}
	// Another error is read again after a pause.
	f.stopped = false
	f.readCmd = 4
	out = f.Step(leaderRead{cmd: 4, err: errors.New("boom")})
	if len(out.Commands) != 1 || out.Commands[0].pause <= 0 {
		t.Fatalf("after an error: want a read after a pause, got %+v", out)
	}
}

// When the last stream has gone, the follower stops reading at the next
// watch event; a new stream starts the reads again and gets the leader of
// a fresh read, not the stale one.
func TestFollowerIdlesWithoutStreams(t *testing.T) {
	f := &follower{waiting: map[uint64]waiter{}, cursors: map[uint64]int{}}
	a, b := Leader{ID: "a", Node: "/e/a"}, Leader{ID: "b", Node: "/e/b"}
	f.Step(nextChange{req: 1, stream: 1, pos: -1})
	f.Step(leaderRead{cmd: 1, leader: a})
	f.Step(streamGone{stream: 1})
	if out := f.Step(readAgain{cmd: 1}); len(out.Commands) != 0 {
		t.Fatalf("no stream is left, yet the follower reads again: %+v", out)
	}
	out := f.Step(nextChange{req: 2, stream: 2, pos: -1})
	if len(out.Commands) != 1 || len(out.Replies) != 0 {
		t.Fatalf("a new stream: want one read and no answer yet, got %+v", out)
	}
	out = f.Step(leaderRead{cmd: 2, leader: b})
	if len(out.Replies) != 1 || out.Replies[0].Value.(change).leader != b {
		t.Fatalf("the new stream's first leader: want b from the fresh read, got %+v", out)
	}
}

// A stream opened when none is open gets the leader of a read made for
// it, even while the follower's last watch is armed (its event can come
// after the caller saw the change) or a read is out: their answers are
// stale, and ignored.
func TestFollowerFirstStreamReadsAfresh(t *testing.T) {
	f := &follower{waiting: map[uint64]waiter{}, cursors: map[uint64]int{}}
	a, b := Leader{ID: "a", Node: "/e/a"}, Leader{ID: "b", Node: "/e/b"}
	f.Step(nextChange{req: 1, stream: 1, pos: -1})
	f.Step(leaderRead{cmd: 1, leader: a}) // its watch is armed
	f.Step(streamGone{stream: 1})
	out := f.Step(nextChange{req: 2, stream: 2, pos: -1}) // a resigned, b leads: the event is not in yet
	if len(out.Commands) != 1 || len(out.Replies) != 0 {
		t.Fatalf("a stream opened with the last watch armed: want a fresh read and no answer yet, got %+v", out)
	}
	if out := f.Step(readAgain{cmd: 1}); len(out.Commands) != 0 || len(out.Replies) != 0 {
		t.Fatalf("the stale watch's event: want nothing, got %+v", out)
	}
	out = f.Step(leaderRead{cmd: 2, leader: b})
	if len(out.Replies) != 1 || out.Replies[0].Value.(change).leader != b {
		t.Fatalf("the new stream's first leader: want b, got %+v", out)
	}
	// A stream opened while a read is out: the read's answer is stale.
	f.Step(readAgain{cmd: 2}) // stream 2 is open: read 3 goes out
	f.Step(streamGone{stream: 2})
	f.Step(nextChange{req: 3, stream: 3, pos: -1}) // read 4
	if out := f.Step(leaderRead{cmd: 3, leader: b}); len(out.Replies) != 0 || len(out.Commands) != 0 {
		t.Fatalf("the stale read's answer: want nothing, got %+v", out)
	}
	out = f.Step(leaderRead{cmd: 4, leader: a})
	if len(out.Replies) != 1 || out.Replies[0].Value.(change).leader != a {
		t.Fatalf("want a from the fresh read, got %+v", out)
	}
}

// Opening a stream makes one serve command carrying the stream, whose id
// is the stream's, and answers the open at once; the stream's end answers
// that command.
func TestFollowerOpensStreams(t *testing.T) {
	f := &follower{waiting: map[uint64]waiter{}, cursors: map[uint64]int{}}
	s := &stream{}
	out := f.Step(openStream{req: 7, s: s})
	if len(out.Commands) != 1 || out.Commands[0].serve != s || len(out.Replies) != 1 || out.Replies[0].Req != 7 {
		t.Fatalf("open: want one serve command and the open's answer, got %+v", out)
	}
	id := out.Commands[0].id
	f.Step(nextChange{req: 8, stream: id, pos: -1})
	if _, ok := f.cursors[id]; !ok {
		t.Fatal("the stream's first ask set no cursor")
	}
	f.Step(streamGone{stream: id})
	if len(f.cursors) != 0 || len(f.waiting) != 0 {
		t.Fatalf("after the stream's end: cursors %v, waiting %v", f.cursors, f.waiting)
	}
}
