package testkit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// WatchedPaths returns the paths on which c's session has a data or
// exists watch armed, sorted: the real server's own list (four-letter word
// wchc, which leaves child watches out), or the simulator's. An exists
// watch on a node that is gone for good waits for a creation that never
// comes: it stays there, and in the client, until the session ends. A test
// that a recipe leaves none behind reads this once the recipe is done with
// the path.
func WatchedPaths(t testing.TB, tg Target, c zk.Conn) []string {
	t.Helper()
	switch tg := tg.(type) {
	case simTarget:
		return tg.s.WatchedPaths(c)
	case *serverTarget:
		ctx, cancel := context.WithTimeout(t.Context(), targetWait)
		defer cancel()
		reply, err := FourLetterWord(ctx, tg.addr, "wchc")
		if err != nil {
			t.Fatalf("testkit: wchc: %v", err)
		}
		return sessionWatches(reply, c.SessionID())
	}
	t.Fatalf("testkit: WatchedPaths: target %s", tg.Name())
	return nil
}

// sessionWatches reads the paths listed for session in a wchc reply: a
// line "0x<session>" followed by one tab-indented line per path.
func sessionWatches(reply string, session int64) []string {
	var paths []string
	in := false
	for _, line := range strings.Split(reply, "\n") {
		switch {
		case strings.HasPrefix(line, "0x"):
			in = strings.TrimSpace(line) == fmt.Sprintf("0x%x", session)
		case in && strings.TrimSpace(line) != "":
			paths = append(paths, strings.TrimSpace(line))
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}
