package observers

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/events"
)

// timeline is what WriteHTML and WriteChromeTrace draw: groups (a recipe
// and path) of lanes (an instance), each with its states, events, notes
// and spans packed into tracks.
type timeline struct {
	start, end time.Time
	groups     []*group
	notes      []Note // not tied to a lane
	nspans     int
	nrecs      int
	dropped    uint64
}

type group struct {
	name  string // "lock /demo/lock"
	lanes []*lane
}

type lane struct {
	name   string // the instance
	id     int    // from 1, in order of first appearance
	recs   []Record
	states []stateBar
	notes  []Note
	tracks [][]*laneSpan // each track's spans nest or are disjoint
	depth  []int         // per track: the most spans open at once
	last   time.Time     // its last record, note or span end
}

type stateBar struct {
	state    events.State
	from, to time.Time
}

type laneSpan struct {
	*Span
	depth int // spans of its track open around it
}

// buildTimeline sorts recs, spans and notes into lanes.
func buildTimeline(recs []Record, spans []Span, notes []Note, dropped uint64) *timeline {
	tl := &timeline{nspans: len(spans), nrecs: len(recs), dropped: dropped}
	// Wall clock times only: a monotonic reading, which events and spans
	// made in this process have and recordings read back lack, would
	// place them differently.
	recs = slices.Clone(recs)
	for i := range recs {
		recs[i].Time = recs[i].Time.Round(0)
	}
	spans = slices.Clone(spans)
	for i := range spans {
		s := &spans[i]
		s.Start, s.End = s.Start.Round(0), s.End.Round(0)
		s.Events = slices.Clone(s.Events)
		for j := range s.Events {
			s.Events[j].Time = s.Events[j].Time.Round(0)
		}
	}
	notes = slices.Clone(notes)
	for i := range notes {
		notes[i].Time = notes[i].Time.Round(0)
	}
	slices.SortStableFunc(recs, func(a, b Record) int { return a.Time.Compare(b.Time) })
	first := true
	widen := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if first || t.Before(tl.start) {
			tl.start = t
		}
		if first || t.After(tl.end) {
			tl.end = t
		}
		first = false
	}
	for _, r := range recs {
		widen(r.Time)
	}
	for _, s := range spans {
		widen(s.Start)
		widen(s.End)
	}
	for _, n := range notes {
		widen(n.Time)
	}

	// Lanes from the events.
	groups := map[string]*group{}
	lanes := map[string]*lane{}
	byName := map[string][]*lane{} // instance → its lanes
	bySpan := map[trace.SpanID]*lane{}
	bySession := map[int64][]*lane{}
	var all []*lane
	laneOf := func(groupName, instance string) *lane {
		key := groupName + "\x00" + instance
		if l := lanes[key]; l != nil {
			return l
		}
		g := groups[groupName]
		if g == nil {
			g = &group{name: groupName}
			groups[groupName] = g
			tl.groups = append(tl.groups, g)
		}
		l := &lane{name: instance, id: len(lanes) + 1}
		lanes[key] = l
		g.lanes = append(g.lanes, l)
		byName[instance] = append(byName[instance], l)
		all = append(all, l)
		return l
	}
	paths := map[*lane]string{}
	for _, r := range recs {
		l := laneOf(r.Recipe+" "+r.Path, r.Instance)
		paths[l] = r.Path
		if n := len(l.states); n > 0 {
			l.states[n-1].to = r.Time
		}
		l.states = append(l.states, stateBar{state: r.State, from: r.Time})
		l.recs = append(l.recs, r)
		l.last = r.Time
		if r.SpanID.IsValid() && bySpan[r.SpanID] == nil {
			bySpan[r.SpanID] = l
		}
		if r.Session != 0 && !slices.Contains(bySession[r.Session], l) {
			bySession[r.Session] = append(bySession[r.Session], l)
		}
	}

	// Each span's lane: by span id, else by session and path, else its
	// parent's, else a child's.
	owner := make([]*lane, len(spans))
	index := make(map[trace.SpanID]int, len(spans))
	for i := range spans {
		index[spans[i].SpanID] = i
	}
	for i := range spans {
		s := &spans[i]
		if l := bySpan[s.SpanID]; l != nil {
			owner[i] = l
			continue
		}
		cands := bySession[sessionOf(s.Attrs)]
		if len(cands) > 1 {
			var near []*lane
			for _, l := range cands {
				if mentions(s, paths[l]) {
					near = append(near, l)
				}
			}
			cands = near
		}
		if len(cands) == 1 {
			owner[i] = cands[0]
		}
	}
	for changed := true; changed; {
		changed = false
		for i := range spans {
			p, ok := index[spans[i].Parent]
			if !ok || spans[i].Parent == (trace.SpanID{}) {
				continue
			}
			switch {
			case owner[i] == nil && owner[p] != nil:
				owner[i], changed = owner[p], true
			case owner[p] == nil && owner[i] != nil:
				owner[p], changed = owner[i], true
			}
		}
	}
	// Spans of no instance: a lane per root span name.
	for i := range spans {
		if owner[i] != nil {
			continue
		}
		root := i
		for seen := 0; seen < len(spans); seen++ {
			p, ok := index[spans[root].Parent]
			if !ok || !spans[root].Parent.IsValid() {
				break
			}
			root = p
		}
		name := spans[root].Name
		if j := strings.IndexByte(name, ' '); j > 0 {
			name = name[:j]
		}
		owner[i] = laneOf("spans of no recipe instance", name)
	}
	perLane := map[*lane][]*Span{}
	for i := range spans {
		perLane[owner[i]] = append(perLane[owner[i]], &spans[i])
	}
	for l, ss := range perLane {
		l.pack(ss)
	}

	for _, n := range notes {
		if l := noteLane(all, n); l != nil {
			l.notes = append(l.notes, n)
			l.last = maxTime(l.last, n.Time)
			continue
		}
		tl.notes = append(tl.notes, n)
	}

	// Lanes by name in each group ("worker-2" before "worker-10").
	id := 0
	for _, g := range tl.groups {
		slices.SortStableFunc(g.lanes, func(a, b *lane) int { return naturalCompare(a.name, b.name) })
		for _, l := range g.lanes {
			id++
			l.id = id
		}
	}

	// A lane's last state lasts to the end, unless the instance stopped:
	// then to its last activity.
	for _, l := range all {
		if n := len(l.states); n > 0 {
			l.states[n-1].to = tl.end
			if l.states[n-1].state == events.StateStop {
				l.states[n-1].to = l.last
			}
		}
	}
	return tl
}

// noteLane is the lane a note names: one of the instance's name (or
// "name/..." : a semaphore's "worker-1/1"), the one active at the note's
// time, else the one whose activity is nearest to it; nil when none.
func noteLane(all []*lane, n Note) *lane {
	if n.Instance == "" {
		return nil
	}
	var best *lane
	var bestGap time.Duration
	for _, l := range all {
		if (l.name != n.Instance && !strings.HasPrefix(l.name, n.Instance+"/")) || len(l.recs) == 0 {
			continue
		}
		var gap time.Duration
		switch first := l.recs[0].Time; {
		case n.Time.Before(first):
			gap = first.Sub(n.Time)
		case n.Time.After(l.last):
			gap = n.Time.Sub(l.last)
		}
		if best == nil || gap < bestGap {
			best, bestGap = l, gap
		}
	}
	return best
}

// pack places ss in tracks where spans nest or are apart: a span goes in
// the first track whose innermost open span contains it (or that has none
// open), so concurrent requests of one call share lines no wider than
// they need.
func (l *lane) pack(ss []*Span) {
	slices.SortStableFunc(ss, func(a, b *Span) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return b.End.Compare(a.End) // the longer, enclosing one first
	})
	var stacks [][]*Span
	for _, s := range ss {
		l.last = maxTime(l.last, s.End)
		placed := false
		for t := range stacks {
			st := stacks[t]
			for len(st) > 0 && !st[len(st)-1].End.After(s.Start) {
				st = st[:len(st)-1]
			}
			if len(st) > 0 && s.End.After(st[len(st)-1].End) {
				stacks[t] = st
				continue
			}
			l.tracks[t] = append(l.tracks[t], &laneSpan{Span: s, depth: len(st)})
			l.depth[t] = max(l.depth[t], len(st)+1)
			stacks[t] = append(st, s)
			placed = true
			break
		}
		if !placed {
			stacks = append(stacks, []*Span{s})
			l.tracks = append(l.tracks, []*laneSpan{{Span: s}})
			l.depth = append(l.depth, 1)
		}
	}
}

// sessionOf is the session id a span's attributes name (an attribute
// whose key has "session" in it: an integer, or a "0x" hex string), or 0.
func sessionOf(attrs []attribute.KeyValue) int64 {
	for _, kv := range attrs {
		if !strings.Contains(string(kv.Key), "session") {
			continue
		}
		switch kv.Value.Type() {
		case attribute.INT64:
			return kv.Value.AsInt64()
		case attribute.STRING:
			s := kv.Value.AsString()
			if v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64); err == nil && strings.HasPrefix(s, "0x") {
				return int64(v)
			}
		}
	}
	return 0
}

// mentions says whether s names path: in its name ("create /app/lock")
// or a string attribute at or under it.
func mentions(s *Span, path string) bool {
	if path == "" {
		return false
	}
	under := func(v string) bool { return v == path || strings.HasPrefix(v, path+"/") }
	if i := strings.LastIndexByte(s.Name, ' '); i >= 0 && under(s.Name[i+1:]) {
		return true
	}
	for _, kv := range s.Attrs {
		if kv.Value.Type() == attribute.STRING && under(kv.Value.AsString()) {
			return true
		}
	}
	return false
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sortAttrs sorts attributes by key.
func sortAttrs(kvs []attribute.KeyValue) {
	slices.SortFunc(kvs, func(a, b attribute.KeyValue) int { return cmp.Compare(a.Key, b.Key) })
}

// isFault says whether an event type is marked as a fault.
func isFault(t events.Type) bool {
	switch t {
	case events.Suspended, events.Lost, events.Failed, events.Overflow:
		return true
	}
	return false
}

// naturalCompare orders strings with their runs of digits compared as
// numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
