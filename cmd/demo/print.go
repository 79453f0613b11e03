package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/observers"
)

// printer writes the demo's lines, whole, from any goroutine, each with its
// time since the start, in the order of those times: an event reaches its
// follower goroutine a little after it happened, so lines wait up to lag
// for earlier ones before they are written, and flush writes the rest.
type printer struct {
	mu      sync.Mutex
	w       io.Writer
	start   time.Time
	pending []pendingLine        // sorted by time
	tf      *observers.TraceFile // every event, for -html, -trace-json
}

type pendingLine struct {
	at   time.Time
	text string
}

// lag is how long a line waits for lines with earlier times.
const lag = 100 * time.Millisecond

func newPrinter(w io.Writer) *printer {
	return &printer{w: w, start: time.Now(), tf: observers.NewTraceFile()}
}

func (p *printer) line(at time.Time, format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	text := fmt.Sprintf("%9.3fms  %s\n", float64(at.Sub(p.start))/1e6, fmt.Sprintf(format, a...))
	i, _ := slices.BinarySearchFunc(p.pending, at, func(l pendingLine, t time.Time) int {
		if l.at.After(t) {
			return 1
		}
		return -1 // equal times keep their arrival order
	})
	p.pending = slices.Insert(p.pending, i, pendingLine{at, text})
	p.writeBefore(time.Now().Add(-lag))
}

// flush writes every line still waiting.
func (p *printer) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeBefore(time.Now().Add(time.Hour))
}

func (p *printer) writeBefore(t time.Time) {
	n := 0
	for n < len(p.pending) && p.pending[n].at.Before(t) {
		io.WriteString(p.w, p.pending[n].text)
		n++
	}
	p.pending = p.pending[n:]
}

// key prints what the columns of an event line are.
func (p *printer) key() {
	p.say("columns: time since the start | who | lifecycle event | the state it left its machine in | details")
	p.say("(locks, read/write locks and semaphores in lock words: ACQUIRED, RELEASED, HELD for ELECTED_COMPLETE, STOP_COMPLETE, LEADER)")
}

// crash crashes who's session (cluster.crash), marks it on the timeline,
// and says how.
func (p *printer) crash(c *cluster, who string, conn zk.Conn) string {
	how := c.crash(conn)
	p.tf.AddNote(observers.Note{Time: time.Now(), Instance: who, Text: who + " crashes"})
	return how
}

// lockWords are the names a lock, read/write lock or semaphore event or
// state is printed with, for those the contention engine names in
// election words.
var lockWords = map[string]string{
	events.ElectedStart.String():    "GRANT_START",
	events.ElectedComplete.String(): "ACQUIRED",
	events.StopStart.String():       "RELEASE_START",
	events.StopComplete.String():    "RELEASED",
	string(events.StateLeader):      "HELD",
}

// words is name in the words of recipe.
func words(recipe, name string) string {
	switch recipe {
	case "lock", "rwlock", "semaphore":
		if w, ok := lockWords[name]; ok {
			return w
		}
	}
	return name
}

// say prints a line of the story.
func (p *printer) say(format string, a ...any) { p.line(time.Now(), "== "+format, a...) }

// event prints one lifecycle event of who: its type, the state it left
// the machine in, and what it carries.
func (p *printer) event(who string, ev events.Event) {
	if ev.Instance == "" {
		ev.Instance = who
	}
	p.tf.AddEvent(ev)
	s := fmt.Sprintf("%-11s %-18s %-9s", who, words(ev.Recipe, ev.Type.String()), words(ev.Recipe, string(ev.State)))
	if ev.Term != 0 {
		s += fmt.Sprintf(" term=%d", ev.Term)
	}
	if ev.Recipe == "twophase" && ev.Node != "" {
		s += " tx=" + ev.Node[strings.LastIndexByte(ev.Node, '/')+1:]
	} else if ev.Recipe == "discovery" && ev.Node != "" {
		s += " instance=" + ev.Node[strings.LastIndexByte(ev.Node, '/')+1:]
	} else if n := len(ev.Node); n >= 10 && strings.Trim(ev.Node[n-10:], "0123456789") == "" {
		s += " seq=" + ev.Node[n-10:] // the node's sequence number (none yet on a create's prefix)
	}
	if ev.Token != 0 {
		s += fmt.Sprintf(" token=%#x", ev.Token)
	}
	switch ev.Type {
	case events.Suspended, events.Reconnected, events.Lost:
		s += fmt.Sprintf(" session=%#x", ev.SessionID)
	case events.Overflow:
		s += fmt.Sprintf(" missed=%d", ev.Missed)
	}
	if ev.Err != nil {
		s += " err=" + ev.Err.Error()
	}
	p.line(ev.Time, "%s", s)
}

// follow prints who's events until sub ends; wg tracks it.
func (p *printer) follow(wg *sync.WaitGroup, who string, sub *events.Subscription) {
	wg.Go(func() {
		for ev := range sub.C {
			p.event(who, ev)
		}
	})
}

// percentile is the nearest-rank percentile: the smallest sample with at
// least p of all samples at or below it.
func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(d))
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
