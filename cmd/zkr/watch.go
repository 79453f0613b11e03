package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
)

// change is one line of zkr watch: a node added, updated or removed, its
// data version and data at that change.
type change struct {
	Event   string `json:"event"` // added, updated, removed
	Path    string `json:"path"`
	Version int32  `json:"version"`
	Data    string `json:"data"`
}

// watchCmd follows the node at PATH (a node cache) or the tree under it
// (-tree, to -depth levels below it) and prints the nodes there once
// loaded, as added, then each change as it happens, until a signal.
func watchCmd(e *env, args []string) int {
	c := newCommon("watch", "zkr watch [-tree [-depth N]] [flags] PATH", e.stderr)
	tree := c.fs.Bool("tree", false, "follow PATH and every node below it (a tree cache), not PATH alone")
	depth := c.fs.Int("depth", -1, "with -tree: follow nodes at most N levels below PATH (PATH is 0; default: no limit)")
	path, err := onePath(c, args)
	if err != nil {
		return e.fail("watch", err)
	}
	var opts []cache.Option
	switch {
	case *depth != -1 && !*tree:
		return e.fail("watch", usagef("-depth is for -tree"))
	case *depth < -1:
		return e.fail("watch", usagef("-depth %d: want 0 or more", *depth))
	case *depth >= 0:
		opts = append(opts, cache.WithMaxDepth(*depth))
	}
	ctx, conn, done, err := e.session(c)
	if err != nil {
		return e.fail("watch", err)
	}
	defer done()
	w := &watcher{c: c, e: e, shown: map[string]int32{}}
	if *tree {
		tc, err := cache.NewTree(conn, path, opts...)
		if err != nil {
			return e.fail("watch", err)
		}
		defer tc.Close()
		w.walk = tc.Walk
		err = w.follow(ctx, tc.Subscribe())
		return w.end(ctx, err)
	}
	nc, err := cache.NewNode(conn, path)
	if err != nil {
		return e.fail("watch", err)
	}
	defer nc.Close()
	w.walk = func(fn func(cache.Node) bool) {
		if n, ok := nc.Get(); ok {
			fn(n)
		}
	}
	return w.end(ctx, w.follow(ctx, nc.Subscribe()))
}

// watcher prints a cache's changes.
type watcher struct {
	c     *common
	e     *env
	walk  func(func(cache.Node) bool) // the cache's nodes, a parent before its children
	shown map[string]int32            // the nodes printed as there, and the version printed
}

// follow prints the cache's nodes once it is loaded, then its changes,
// until ctx ends or the subscription does.
//
// The nodes are printed from the cache's view at INITIALIZED, not from
// the first load's events, which come only to a subscriber that was there
// before them. The view may already show a change whose event comes
// after INITIALIZED: such an event is not printed again (an update to a
// version printed already, an add of a node printed, a removal of a node
// not printed).
func (w *watcher) follow(ctx context.Context, sub *events.Subscription) error {
	defer sub.Close()
	loaded := false
	for {
		var ev events.Event
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-sub.C:
			if !ok {
				return errors.New("the cache stopped (the connection closed)")
			}
			ev = e
		}
		switch ev.Type {
		case events.Initialized:
			loaded = true
			w.walk(func(n cache.Node) bool {
				w.print("added", n.Path, n.Stat.Version, n.Data)
				return true
			})
		case events.NodeAdded, events.NodeUpdated, events.NodeRemoved:
			if loaded {
				w.change(ev)
			}
		case events.Suspended:
			fmt.Fprintln(w.e.stderr, "zkr watch: connection lost; the watches hold until the session expires")
		case events.Reconnected:
			fmt.Fprintln(w.e.stderr, "zkr watch: reconnected")
		case events.Lost:
			fmt.Fprintln(w.e.stderr, "zkr watch: session expired; reading everything again, printing what changed")
		case events.Failed:
			fmt.Fprintf(w.e.stderr, "zkr watch: %s: %v\n", ev.Node, ev.Err)
		case events.Overflow:
			fmt.Fprintf(w.e.stderr, "zkr watch: %d events missed\n", ev.Missed)
		}
	}
}

// change prints ev unless the view printed at INITIALIZED showed it.
func (w *watcher) change(ev events.Event) {
	v, there := w.shown[ev.Node]
	switch {
	case ev.Type == events.NodeAdded && there,
		ev.Type == events.NodeUpdated && there && ev.Version <= v,
		ev.Type == events.NodeRemoved && !there:
		return
	case ev.Type == events.NodeAdded:
		w.print("added", ev.Node, ev.Version, ev.Data)
	case ev.Type == events.NodeUpdated:
		w.print("updated", ev.Node, ev.Version, ev.Data)
	default:
		w.print("removed", ev.Node, ev.Version, ev.Data)
	}
}

// print writes one change: event, path, version and data, tab-separated
// (the data quoted when it has a tab, a line break or another
// non-printing character), or a JSON object with -o json.
func (w *watcher) print(event, path string, version int32, data []byte) {
	if event == "removed" {
		delete(w.shown, path)
	} else {
		w.shown[path] = version
	}
	text := string(data)
	if !printable(data) {
		text = strconv.Quote(text)
	}
	w.c.print(w.e.stdout, event+"\t"+path+"\t"+strconv.Itoa(int(version))+"\t"+text,
		change{Event: event, Path: path, Version: version, Data: string(data)})
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// end is watch's exit status: 0 when a signal ended it.
func (w *watcher) end(ctx context.Context, err error) int {
	if ctx.Err() != nil {
		return 0 // interrupted: the normal end
	}
	if err != nil {
		return w.e.fail("watch", err)
	}
	return 0
}
