package chaos

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The lock model: one lock (or one election) with an owner and the
// fencing token of the last grant. Acquire by client c returning token t
// is legal when nobody holds it and t is above every token granted
// before; release by c is legal when c holds it.

type lockInput struct {
	release bool
	client  int
}

type lockState struct {
	holder int // -1: free
	token  int64
}

var lockModel = porcupine.Model{
	Init: func() any { return lockState{holder: -1} },
	Step: func(state, input, output any) (bool, any) {
		st, in := state.(lockState), input.(lockInput)
		if in.release {
			if st.holder != in.client {
				return false, st
			}
			return true, lockState{holder: -1, token: st.token}
		}
		tok := output.(int64)
		if st.holder != -1 || tok <= st.token {
			return false, st
		}
		return true, lockState{holder: in.client, token: tok}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(lockInput)
		if in.release {
			return fmt.Sprintf("release(%d)", in.client)
		}
		return fmt.Sprintf("acquire(%d) → %#x", in.client, output.(int64))
	},
	DescribeState: func(state any) string {
		st := state.(lockState)
		if st.holder < 0 {
			return fmt.Sprintf("free, last token %#x", st.token)
		}
		return fmt.Sprintf("held by %d, token %#x", st.holder, st.token)
	},
}

// The FIFO queue model: offer appends, a take (a claim that was acked)
// removes the head and must return it. An offer carries the sequence
// number the server gave its item (learnt from the consumer that got it),
// and while the queue holds items, offers must take effect in that order:
// that is what a ZooKeeper queue promises, and it keeps porcupine from
// trying every order of concurrent offers while items pile up. (An empty
// queue's node is a container the server may reap, and the next offer
// creates it again with its counter back at 0.)

type queueInput struct {
	take  bool
	value string // offer's
	seq   int64  // offer's: the item's sequence number
}

// queueState is the last sequence number offered and the queue's items,
// oldest first, joined by "\x00", so that states compare with ==.
type queueState struct {
	last  int64
	items string
}

func (s queueState) list() []string {
	if s.items == "" {
		return nil
	}
	return strings.Split(s.items, "\x00")
}

var queueModel = porcupine.Model{
	Init: func() any { return queueState{last: -1} },
	Step: func(state, input, output any) (bool, any) {
		st, in := state.(queueState), input.(queueInput)
		if !in.take {
			if st.items != "" && in.seq <= st.last {
				return false, st
			}
			if st.items == "" {
				return true, queueState{last: in.seq, items: in.value}
			}
			return true, queueState{last: in.seq, items: st.items + "\x00" + in.value}
		}
		items := st.list()
		if len(items) == 0 || items[0] != output.(string) {
			return false, st
		}
		return true, queueState{last: st.last, items: strings.Join(items[1:], "\x00")}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(queueInput)
		if in.take {
			return fmt.Sprintf("take → %s", output)
		}
		return fmt.Sprintf("offer(%s) as %d", in.value, in.seq)
	},
	DescribeState: func(state any) string {
		items := state.(queueState).list()
		if len(items) > 8 {
			return fmt.Sprintf("[%s ... %d more]", strings.Join(items[:8], " "), len(items)-8)
		}
		return "[" + strings.Join(items, " ") + "]"
	},
}

// never is the return time of an operation whose outcome is unknown (a
// lost reply): it may take effect any time after its call.
const never = math.MaxInt64 / 2

// history collects operations with times relative to its start.
type history struct {
	t0  time.Time
	mu  sync.Mutex
	ops map[string][]porcupine.Operation // by partition: one lock, one queue
}

func newHistory() *history {
	return &history{t0: time.Now(), ops: map[string][]porcupine.Operation{}}
}

func (h *history) at(t time.Time) int64 { return int64(t.Sub(h.t0)) }

func (h *history) add(part string, op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops[part] = append(h.ops[part], op)
}

func (h *history) partitions() map[string][]porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]porcupine.Operation{}
	for k, v := range h.ops {
		out[k] = slices.Clone(v)
	}
	return out
}

// linearizable checks ops against model. When porcupine finds them not
// linearizable (or cannot tell in time) it writes the visualisation under
// dir and returns its path with the result.
func linearizable(model porcupine.Model, ops []porcupine.Operation, dir, name string) (porcupine.CheckResult, string) {
	res, info := porcupine.CheckOperationsVerbose(model, ops, 30*time.Second)
	if res == porcupine.Ok {
		return res, ""
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return res, fmt.Sprintf("(visualisation failed: %v)", err)
	}
	// The operations as text too, in call order, for grep.
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return cmpInt(a.Call, b.Call) })
	var b strings.Builder
	for _, op := range sorted {
		ret := fmt.Sprint(time.Duration(op.Return))
		if op.Return >= never {
			ret = "never"
		}
		fmt.Fprintf(&b, "%v\t%s\tclient %d\t%s\n", time.Duration(op.Call), ret, op.ClientId, model.DescribeOperation(op.Input, op.Output))
	}
	os.WriteFile(strings.TrimSuffix(path, ".html")+".txt", []byte(b.String()), 0o644)
	return res, path
}

// checkHistory fails t unless every partition of h is linearizable under
// model, naming the visualisation of each that is not.
func checkHistory(t *testing.T, what string, model porcupine.Model, h *history) {
	t.Helper()
	dir := outDir(t)
	parts := h.partitions()
	total := 0
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		ops := parts[name]
		total += len(ops)
		res, path := linearizable(model, ops, dir, what+" "+name)
		if res != porcupine.Ok {
			t.Errorf("porcupine: the %s history of %s (%d operations) is %s; visualisation: %s", what, name, len(ops), res, path)
		}
	}
	t.Logf("porcupine: %d %s histories, %d operations checked", len(parts), what, total)
}

// outDir is where visualisations go: the test's temp dir, or CHAOS_OUT
// when set (t.TempDir is removed when the test ends).
func outDir(t *testing.T) string {
	if d := os.Getenv("CHAOS_OUT"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.TempDir()
}

// fifoInversions lists pairs of items taken in the opposite order of their
// offers, where the first offer returned before the second was called: a
// FIFO violation porcupine would take long to prove.
func fifoInversions(ops []porcupine.Operation) []string {
	offers := map[string]porcupine.Operation{}
	var takes []porcupine.Operation
	for _, op := range ops {
		in := op.Input.(queueInput)
		if in.take {
			takes = append(takes, op)
		} else {
			offers[in.value] = op
		}
	}
	slices.SortFunc(takes, func(a, b porcupine.Operation) int { return cmpInt(a.Return, b.Return) })
	var bad []string
	for i, a := range takes {
		for _, b := range takes[i+1:] {
			if a.Return >= b.Call {
				continue // concurrent takes
			}
			oa, ob := offers[a.Output.(string)], offers[b.Output.(string)]
			if ob.Return < oa.Call && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("%s taken before %s, offered after it", a.Output, b.Output))
			}
		}
	}
	return bad
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
