package election

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/contention"
)

// Leader is who leads: the participant id, its node, and the term's
// fencing token. The zero Leader is vacant: no one leads.
type Leader struct {
	ID    string
	Node  string
	Token int64
}

// Vacant reports that no one leads.
func (l Leader) Vacant() bool { return l.Node == "" }

// Participant is one participant in queue order; the first leads.
type Participant struct {
	ID   string
	Node string
}

// Leader reads who leads now (a vacant Leader when no one does). After
// Close it returns ErrClosed.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.Err(); err != nil {
		return Leader{}, err
	}
	l, _, err := e.readLeader(ctx, false)
	return l, err
}

// Participants reads every participant, in queue order. After Close it
// returns ErrClosed.
func (e *Election) Participants(ctx context.Context) ([]Participant, error) {
	if err := e.Err(); err != nil {
		return nil, err
	}
	kids, _, err := e.conn.Children(ctx, e.path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ps []Participant
	for _, name := range contention.Contenders(kids, markers) {
		node := zk.Join(e.path, name)
		data, _, err := e.conn.Get(ctx, node)
		if errors.Is(err, zk.ErrNoNode) {
			continue // left meanwhile
		}
		if err != nil {
			return nil, err
		}
		ps = append(ps, Participant{ID: string(data), Node: node})
	}
	return ps, nil
}

// readLeader reads the leader; with watch it also returns a one-shot watch
// that fires when that may have changed: on the leader's node when there is
// one (no reads while followers come and go), on the directory when not.
func (e *Election) readLeader(ctx context.Context, watch bool) (Leader, <-chan zk.WatchEvent, error) {
	for {
		kids, _, err := e.conn.Children(ctx, e.path)
		switch {
		case errors.Is(err, zk.ErrNoNode) && watch:
			_, ok, ch, err := e.conn.ExistsW(ctx, e.path)
			if err != nil {
				return Leader{}, nil, err
			}
			if !ok {
				return Leader{}, ch, nil
			}
			continue // created meanwhile: read it
		case errors.Is(err, zk.ErrNoNode):
			return Leader{}, nil, nil
		case err != nil:
			return Leader{}, nil, err
		}
		names := contention.Contenders(kids, markers)
		if len(names) == 0 {
			if !watch {
				return Leader{}, nil, nil
			}
			kids, _, ch, err := e.conn.ChildrenW(ctx, e.path)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return Leader{}, nil, err
			}
			if err == nil && len(contention.Contenders(kids, markers)) == 0 {
				return Leader{}, ch, nil
			}
			continue // someone joined (or the directory went) meanwhile
		}
		node := zk.Join(e.path, names[0])
		var data []byte
		var st zk.Stat
		var ch <-chan zk.WatchEvent
		if watch {
			data, st, ch, err = e.conn.GetW(ctx, node)
		} else {
			data, st, err = e.conn.Get(ctx, node)
		}
		if errors.Is(err, zk.ErrNoNode) {
			continue // the leader left between the two reads
		}
		if err != nil {
			return Leader{}, nil, err
		}
		return Leader{ID: string(data), Node: node, Token: st.Czxid}, ch, nil
	}
}

// Observe streams leader changes to this caller: first the current leader
// (or a vacant Leader), then every change, in order, once each — including
// a leader lost to a crash. The stream is the caller's own: a slow reader
// misses nothing and delays no one. The channel closes when ctx ends or the
// election is closed (then Err returns ErrClosed); after Close it is
// closed already.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	e.mu.Lock()
	select {
	case <-e.closed:
		e.mu.Unlock()
		out := make(chan Leader)
		close(out)
		return out
	default:
	}
	if e.obs == nil {
		e.obs = newObserver(e)
	}
	obs := e.obs
	e.mu.Unlock()
	return obs.subscribe(ctx) // a closed channel if Close stopped obs meanwhile
}

// observer follows the leader for every Observe stream of an Election: one
// goroutine reads and watches, and appends each change to a log that each
// stream's goroutine reads at its own pace.
type observer struct {
	e      *Election
	cancel context.CancelFunc
	done   chan struct{}
	quit   chan struct{} // closed by stop: streams end even mid-send

	mu      sync.Mutex
	log     []Leader // changes not yet read by every stream
	base    int      // the index of log[0] since the start
	readers map[*int]struct{}
	changed chan struct{} // closed and replaced on every append and at stop
	stopped bool
	wg      sync.WaitGroup
}

func newObserver(e *Election) *observer {
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{e: e, cancel: cancel, done: make(chan struct{}), quit: make(chan struct{}), readers: make(map[*int]struct{}), changed: make(chan struct{})}
	go o.follow(ctx)
	return o
}

// follow reads the leader, publishes it when it changed, and waits for the
// watch. Errors (a lost connection, an expired session) just mean: read
// again; a request made while disconnected waits for the connection.
func (o *observer) follow(ctx context.Context) {
	defer close(o.done)
	first := true
	var last Leader
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		l, ch, err := o.e.readLeader(ctx, true)
		if errors.Is(err, zk.ErrClosed) {
			return
		}
		if err != nil {
			// Read again: at once after a lost connection (the request
			// waits for the next one), with a growing pause otherwise.
			if !errors.Is(err, zk.ErrConnectionLoss) && !errors.Is(err, zk.ErrSessionExpired) {
				backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				}
			}
			continue
		}
		backoff = 0
		if first || l != last {
			first, last = false, l
			o.publish(l)
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

func (o *observer) publish(l Leader) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, l)
	close(o.changed)
	o.changed = make(chan struct{})
}

// subscribe starts a stream at the newest entry of the log.
func (o *observer) subscribe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		close(out)
		return out
	}
	pos := new(int)
	*pos = o.base + max(len(o.log)-1, 0)
	o.readers[pos] = struct{}{}
	o.wg.Add(1)
	o.mu.Unlock()
	go o.stream(ctx, pos, out)
	return out
}

func (o *observer) stream(ctx context.Context, pos *int, out chan<- Leader) {
	defer o.wg.Done()
	defer close(out)
	defer o.leave(pos)
	for {
		o.mu.Lock()
		if o.stopped {
			o.mu.Unlock()
			return
		}
		i := *pos - o.base
		if i >= len(o.log) {
			wait := o.changed
			o.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return
			case <-o.quit:
				return
			}
		}
		l := o.log[i]
		o.mu.Unlock()
		select {
		case out <- l:
		case <-ctx.Done():
			return
		case <-o.quit:
			return
		}
		o.mu.Lock()
		*pos++
		o.trim()
		o.mu.Unlock()
	}
}

func (o *observer) leave(pos *int) {
	o.mu.Lock()
	delete(o.readers, pos)
	o.trim()
	o.mu.Unlock()
}

// trim drops the entries every stream has read, keeping the newest (where a
// new stream starts). Called with mu held.
func (o *observer) trim() {
	low := o.base + len(o.log) - 1
	for p := range o.readers {
		low = min(low, *p)
	}
	if n := low - o.base; n > 0 {
		o.log = append(o.log[:0], o.log[n:]...)
		o.base = low
	}
}

// stop ends the follower and every stream, and waits for them.
func (o *observer) stop() {
	o.cancel()
	<-o.done
	o.mu.Lock()
	o.stopped = true
	o.mu.Unlock()
	close(o.quit)
	o.wg.Wait()
}
