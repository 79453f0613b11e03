package election

import (
	"context"
	"errors"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Observe streams leader changes to this caller: first the current leader
// (or a vacant Leader), then every change, in order, once each — including
// a leader lost to a crash. The stream is the caller's own: a slow reader
// misses nothing and delays no one. The channel closes when ctx ends or the
// election is closed (then Err returns ErrClosed); after Close it is
// closed already, and when Close returns every stream's channel is closed.
//
// The leader is followed by an actor of its own (a runtime.Shell running
// the follower machine below), started by the first Observe and stopped
// by Close. The actor owns the streams: each is a goroutine it starts
// (Shell.Go, so stopping the actor ends it and waits for it) that asks it
// for the next change. While no stream is open it keeps no watch and makes
// no read.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	if f := e.startFollower(); f != nil {
		s := &stream{ctx: ctx, out: out}
		// Not ctx: once the actor has taken the stream, the stream's
		// goroutine closes out; until then, only the actor's end can
		// fail the call (Do then tells whether it was taken).
		if _, err := f.Do(context.WithoutCancel(ctx), func(req uint64) followInput { return openStream{req: req, s: s} }); err == nil {
			return out
		}
	}
	close(out)
	return out
}

// startFollower starts the follower's actor on the first call and returns
// it; nil once Close has begun (Close's own call to startOnce makes sure
// that no follower starts after it).
func (e *Election) startFollower() *runtime.Shell[followInput, followCmd] {
	e.startOnce.Do(func() {
		select {
		case <-e.closed:
			return
		default:
		}
		e.follower = runtime.Run[followInput, followCmd](e.conn, &follower{waiting: map[uint64]waiter{}, cursors: map[uint64]int{}}, runtime.Spec[followInput, followCmd]{
			Recipe: "election", Path: e.path, Instance: e.cfg.ID, Telemetry: e.inst.Telemetry(),
			Exec: e.execFollow,
			// No call is withdrawn (Withdraw nil): a stream's end says streamGone.
			ErrorType: e.inst.ErrorType,
			Closed:    ErrClosed,
		})
	})
	return e.follower
}

// stream is one Observe caller's stream: its ctx and its channel. The
// follower machine only carries it from openStream to the serve command.
type stream struct {
	ctx context.Context
	out chan Leader
}

// serve runs one stream (command id) until its ctx ends or the actor
// stops (actx), sending each change the follower answers, and returns the
// input that tells the follower it is gone. It closes the stream's
// channel.
func serve(f *runtime.Shell[followInput, followCmd], actx context.Context, s *stream, id uint64) followInput {
	defer close(s.out)
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	defer context.AfterFunc(actx, cancel)()
	pos := -1 // the newest change
	for {
		a, err := f.Do(ctx, func(req uint64) followInput { return nextChange{req: req, stream: id, pos: pos} })
		if err != nil {
			return streamGone{stream: id} // ctx ended or the actor stopped
		}
		c := a.Value.(change)
		select {
		case s.out <- c.leader:
			pos = c.pos + 1
		case <-ctx.Done():
			return streamGone{stream: id}
		}
	}
}

// execFollow makes the follower's commands: a stream's goroutine; a read
// of the leader, whose answer is posted at once and whose watch is then
// waited for; or a pause before the next read.
func (e *Election) execFollow(sh *runtime.Shell[followInput, followCmd], cmd followCmd, op runtime.Op) {
	if cmd.serve != nil {
		sh.Go(func(actx context.Context) (followInput, bool) { return serve(sh, actx, cmd.serve, cmd.id), true })
		return
	}
	sh.Go(func(ctx context.Context) (followInput, bool) {
		if cmd.pause > 0 {
			select {
			case <-time.After(cmd.pause):
				return readAgain{cmd: cmd.id}, true
			case <-ctx.Done():
				return nil, false
			}
		}
		var l Leader
		var ch <-chan zk.WatchEvent
		var err error
		op(ctx, "children", func(ctx context.Context) error {
			l, ch, err = e.readLeader(ctx, true)
			return err
		})
		if err != nil {
			return leaderRead{cmd: cmd.id, err: err}, true
		}
		sh.Post(ctx, leaderRead{cmd: cmd.id, leader: l}, true)
		select {
		case <-ch:
			return readAgain{cmd: cmd.id}, true
		case <-ctx.Done():
			return nil, false
		}
	})
}

// The follower's inputs: the types below, and the runtime's standard
// inputs.
type followInput = any

type openStream struct { // Observe: a new stream
	req uint64
	s   *stream
}
type nextChange struct { // a stream asks for the change at pos (-1: the newest)
	req, stream uint64
	pos         int
}
type streamGone struct{ stream uint64 } // a stream ended (its serve command's last input)
type leaderRead struct {                // the reply to a read
	cmd    uint64
	leader Leader
	err    error
}
type readAgain struct{ cmd uint64 } // the read's watch fired, or its pause is over

// followCmd reads the leader with a watch; with pause, it waits that long
// before the next read; with serve, it runs that stream, whose id is the
// command's.
type followCmd struct {
	id    uint64
	pause time.Duration
	serve *stream
}

func (c followCmd) ID() uint64 { return c.id }

// change is the answer to nextChange: the leader at pos.
type change struct {
	pos    int
	leader Leader
}

type waiter struct {
	stream uint64
	pos    int
}

// follower is the pure machine that follows the leader while some stream
// wants it: it reads it with a watch, reads again when the watch fires
// (when no stream is left, it stops there), and keeps a log of the changes
// from which each stream takes the next one at its own pace. The log keeps
// what some stream has not read yet, and the newest change (where a new
// stream starts). A stream that opens when none is open starts from a
// read of its own: what the follower knew may be stale even with its
// watch still armed, as the watch's event can reach the actor after the
// caller saw the change (a Resign, another's Campaign).
type follower struct {
	// readCmd is the read (or the pause before one) the follower waits
	// on: its reply, then its watch's event. 0: none. The inputs of an
	// older command are stale, and ignored.
	readCmd uint64
	lastCmd uint64
	backoff time.Duration
	stopped bool // the connection is closed: nothing more to read

	log     []Leader
	base    int               // the position of log[0]
	waiting map[uint64]waiter // calls waiting for a change not made yet
	cursors map[uint64]int    // per stream: the next position it reads
}

func (f *follower) State() events.State { return events.StateReady }

func (f *follower) Start() runtime.Output[followCmd] { return runtime.Output[followCmd]{} }

func (f *follower) Step(in followInput) runtime.Output[followCmd] {
	var out runtime.Output[followCmd]
	switch in := in.(type) {
	case openStream:
		f.lastCmd++
		out.Commands = append(out.Commands, followCmd{id: f.lastCmd, serve: in.s})
		out.Replies = append(out.Replies, runtime.Reply{Req: in.req})
	case nextChange:
		pos, first := in.pos, in.pos < 0 && len(f.cursors) == 0
		if first { // what we knew is stale: the stream waits for a fresh read
			f.base += len(f.log)
			f.log = nil
		}
		if pos < 0 {
			pos = f.base + max(len(f.log)-1, 0)
		}
		f.cursors[in.stream] = pos
		f.waiting[in.req] = waiter{stream: in.stream, pos: pos}
		f.trim()
		if (first || f.readCmd == 0) && !f.stopped {
			f.read(&out, 0)
		}
	case streamGone:
		delete(f.cursors, in.stream)
		for req, w := range f.waiting {
			if w.stream == in.stream {
				delete(f.waiting, req)
			}
		}
		f.trim()
	case leaderRead:
		switch {
		case in.cmd != f.readCmd: // stale: a fresh read was asked since
		case errors.Is(in.err, zk.ErrClosed):
			f.readCmd, f.stopped = 0, true
		case errors.Is(in.err, zk.ErrConnectionLoss), errors.Is(in.err, zk.ErrSessionExpired):
			f.read(&out, 0) // the read waits for the connection
		case in.err != nil:
			f.backoff = min(max(2*f.backoff, 10*time.Millisecond), time.Second)
			f.read(&out, f.backoff)
		default:
			f.backoff = 0
			if len(f.log) == 0 || f.log[len(f.log)-1] != in.leader {
				f.log = append(f.log, in.leader)
			}
			// Its watch is armed: readAgain follows.
		}
	case readAgain:
		if in.cmd != f.readCmd {
			break // a stale read's watch or pause
		}
		f.readCmd = 0
		if len(f.cursors) > 0 { // else stop following until a stream comes
			f.read(&out, 0)
		}
	case runtime.SessionChange: // reads wait for the connection by themselves
	}
	// Answer every waiting call whose change is there.
	for req, w := range f.waiting {
		if i := w.pos - f.base; i >= 0 && i < len(f.log) {
			out.Replies = append(out.Replies, runtime.Reply{Req: req, Value: change{pos: w.pos, leader: f.log[i]}})
			delete(f.waiting, req)
		}
	}
	return out
}

// read asks for a read of the leader, after pause.
func (f *follower) read(out *runtime.Output[followCmd], pause time.Duration) {
	f.lastCmd++
	f.readCmd = f.lastCmd
	out.Commands = append(out.Commands, followCmd{id: f.lastCmd, pause: pause})
}

// trim drops the changes every stream has read, keeping the newest.
func (f *follower) trim() {
	low := f.base + len(f.log) - 1
	for _, p := range f.cursors {
		low = min(low, p)
	}
	if n := low - f.base; n > 0 {
		f.log = append(f.log[:0], f.log[n:]...)
		f.base = low
	}
}
