package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/observers"
)

// Sizes of the waterfall.
const (
	barCols   = 40 // the width of the root span's bar
	nameCols  = 44
	treeLines = 16 // at most this many spans of one call
)

// writeWaterfall prints, for each kind of root span (the calls: a lock's
// acquire, a queue's take, background work) up to kinds of them, the most
// frequent first, how many there were and their median, and the slowest
// one as a waterfall: each span of its trace on a line, indented under
// its parent, with a bar placing it in the root's time. Spans with an
// error end with "!".
func writeWaterfall(w io.Writer, spans []observers.Span, kinds int) {
	if len(spans) == 0 {
		return
	}
	byID := map[trace.SpanID]*observers.Span{}
	for i := range spans {
		byID[spans[i].SpanID] = &spans[i]
	}
	children := map[trace.SpanID][]*observers.Span{}
	roots := map[string][]*observers.Span{}
	for i := range spans {
		s := &spans[i]
		if _, ok := byID[s.Parent]; ok && s.Parent.IsValid() {
			children[s.Parent] = append(children[s.Parent], s)
			continue
		}
		roots[s.Name] = append(roots[s.Name], s)
	}
	names := make([]string, 0, len(roots))
	for n := range roots {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(roots[b]), len(roots[a])), cmp.Compare(a, b))
	})
	fmt.Fprintf(w, "\nspan waterfall: the slowest call of each kind, its spans placed in its time (! = error)\n")
	for i, n := range names {
		if i == kinds {
			fmt.Fprintf(w, "... and %d kinds more\n", len(names)-kinds)
			break
		}
		rs := roots[n]
		durs := make([]time.Duration, len(rs))
		for j, r := range rs {
			durs[j] = r.End.Sub(r.Start)
		}
		slowest := slices.MaxFunc(rs, func(a, b *observers.Span) int { return cmp.Compare(a.End.Sub(a.Start), b.End.Sub(b.Start)) })
		fmt.Fprintf(w, "\n%s: %d calls, p50 %v, slowest %v (trace %s)\n", n, len(rs),
			percentile(durs, .5).Round(time.Microsecond), slowest.End.Sub(slowest.Start).Round(time.Microsecond), slowest.TraceID)
		lines := 0
		var walk func(s *observers.Span, depth int)
		walk = func(s *observers.Span, depth int) {
			if lines == treeLines {
				fmt.Fprintf(w, "  %s...\n", strings.Repeat("  ", depth))
				lines++
				return
			}
			if lines > treeLines {
				return
			}
			lines++
			fmt.Fprintf(w, "  %s\n", waterfallLine(slowest, s, depth))
			kids := children[s.SpanID]
			slices.SortStableFunc(kids, func(a, b *observers.Span) int { return a.Start.Compare(b.Start) })
			for _, k := range kids {
				walk(k, depth+1)
			}
		}
		walk(slowest, 0)
	}
}

// waterfallLine is s, depth deep under root: its name, duration and bar.
func waterfallLine(root, s *observers.Span, depth int) string {
	name := strings.Repeat("  ", depth) + s.Name
	if s.Status == codes.Error {
		name += " !"
	}
	if len(name) > nameCols {
		name = name[:nameCols-1] + "…"
	}
	total := float64(root.End.Sub(root.Start))
	from, to := 0, barCols
	if total > 0 {
		from = int(float64(s.Start.Sub(root.Start)) / total * barCols)
		to = int(float64(s.End.Sub(root.Start)) / total * barCols)
	}
	from = min(max(from, 0), barCols-1)
	to = min(max(to, from+1), barCols) // at least one column, even past the root's end
	bar := strings.Repeat(" ", from) + strings.Repeat("█", to-from) + strings.Repeat(" ", barCols-to)
	return fmt.Sprintf("%-*s %10v |%s|", nameCols, name, s.End.Sub(s.Start).Round(time.Microsecond), bar)
}
