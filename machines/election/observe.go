package election

import (
	"context"
	"errors"

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
