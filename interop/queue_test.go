package interop

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// startCuratorQueue starts java/CuratorQueue.java: a Curator
// SimpleDistributedQueue on path, driven by offer and drain commands. It
// quits when the test ends.
func startCuratorQueue(t *testing.T, t0 time.Time, addr, path string) *curatorPeer {
	t.Helper()
	p := startJava(t, t0, "curator", "CuratorQueue.java", addr, path)
	t.Logf("Curator SimpleDistributedQueue(%s), session %s, up in %v", path, p.session, time.Since(t0).Round(time.Millisecond))
	return p
}

// items is prefix0 .. prefix(n-1), the items the Curator peer offers.
func items(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(prefix, i)
	}
	return s
}

// Curator's SimpleDistributedQueue and ours share one queue: both name
// items qn-<seq10> under the path, so what one offers the other takes, in
// the order offered; a consumer waiting on an empty queue is woken by the
// other's offer; two consumers draining one queue together take every
// item exactly once, each in queue order.
func TestQueueWithCurator(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const path = "/interop/queue"
	conn := connect(t, srv.Addr())
	cur := startCuratorQueue(t, t0, srv.Addr(), path)
	q, err := queue.New(conn, path, queue.WithID("go"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })

	// Curator offers; ours counts and takes them, in order, and the nodes
	// Curator made have our item format.
	cur.ask("offer 20 c", "OFFERED")
	kids := children(t, ctx, conn, path)
	plain := regexp.MustCompile(`^` + queue.Prefix + `[0-9]{10}$`)
	for _, k := range kids {
		if !plain.MatchString(k) {
			t.Errorf("Curator's item %q does not match %s", k, plain)
		}
	}
	if n, err := q.Len(ctx); n != 20 || err != nil {
		t.Fatalf("Len after Curator offered 20 = %d, %v", n, err)
	}
	var got []string
	for range 20 {
		data, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(data))
	}
	if want := items("c", 20); !slices.Equal(got, want) {
		t.Fatalf("ours took %v from Curator's offers; want %v", got, want)
	}

	// Ours offers (one batch, one multi); Curator takes them, in order.
	var batch [][]byte
	for _, s := range items("g", 20) {
		batch = append(batch, []byte(s))
	}
	if err := q.OfferBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if got := cur.ask("drain 20 5000", "TOOK"); got != strings.Join(items("g", 20), ",") {
		t.Fatalf("Curator took %q from our batch; want g0..g19 in order", got)
	}

	// Ours waits on the empty queue; Curator's offer wakes it.
	taken := make(chan string, 1)
	go func() {
		data, err := q.Take(ctx)
		if err != nil {
			t.Error(err)
		}
		taken <- string(data)
	}()
	// The offer goes through the Java peer's stdin: the Take is all but
	// always waiting by then; if not, it still must take wake0.
	cur.ask("offer 1 wake", "OFFERED")
	if got := <-taken; got != "wake0" {
		t.Fatalf("our waiting Take got %q; want Curator's wake0", got)
	}
	// Curator waits; our offer wakes it.
	cur.send("drain 1 10000")
	if err := q.Offer(ctx, []byte("nudge")); err != nil {
		t.Fatal(err)
	}
	if got := cur.await("TOOK"); got != "nudge" {
		t.Fatalf("Curator's waiting poll got %q; want our nudge", got)
	}

	// Both offer 100; both drain at once: every item once, and each
	// consumer sees each producer's items in the order offered.
	cur.ask("offer 100 c", "OFFERED")
	for _, s := range items("g", 100) {
		if err := q.Offer(ctx, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	cur.send("drain 200 300")
	// Ours starts once Curator has taken one, so both take at once.
	tick := time.NewTicker(time.Millisecond)
	for n := 200; n == 200; {
		<-tick.C
		if n, err = q.Len(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tick.Stop()
	// Takes, not polls: a poll that finds only items behind ours, in
	// Curator's part, takes them at once, out of order (the package doc's
	// exception); a take waits for Curator to take them. The queue is
	// drained once a take has waited two seconds for nothing.
	var ours []string
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		data, err := q.Take(tctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("our take: %v", err)
			}
			break
		}
		ours = append(ours, string(data))
	}
	theirs := strings.Split(cur.await("TOOK"), ",")
	if theirs[0] == "" {
		theirs = nil
	}
	all := slices.Concat(ours, theirs)
	slices.Sort(all)
	want := slices.Concat(items("c", 100), items("g", 100))
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("together took %d items (ours %d, Curator's %d); want each of the 200 once", len(all), len(ours), len(theirs))
	}
	// Curator takes in queue order. Ours, after losing a race, avoids the
	// rest of the lost item's block and takes the next block's items, and
	// never goes back: it takes items in queue order too, leaving those
	// behind it to Curator.
	pos := func(item string) int {
		var i int
		fmt.Sscanf(item[1:], "%d", &i)
		if item[0] == 'g' {
			i += 100
		}
		return i
	}
	for who, took := range map[string][]string{"ours": ours, "Curator": theirs} {
		for i, a := range took {
			var older []string
			for _, b := range took[i+1:] {
				// Items were offered one after another: their sequence
				// numbers differ as their places do.
				if pos(b) < pos(a) {
					older = append(older, b)
				}
			}
			if len(older) > 0 {
				t.Errorf("%s took %s before older items it took later: %v", who, a, older)
			}
		}
	}
	t.Logf("drained together: ours %d, Curator's %d", len(ours), len(theirs))
	if kids := children(t, ctx, conn, path); len(kids) != 0 {
		t.Fatalf("items left: %v", kids)
	}
}
