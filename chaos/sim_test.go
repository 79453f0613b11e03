package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkrecipes/zkrecipes/testkit"
)

// simDuration is how long the simulator runs take faults.
const simDuration = 3 * time.Second

// runSim runs the lock workers (and unless brokenLock, the FIFO queue's
// two producers and consumer, and a sharded queue's two producers and two
// consumers) on the simulator under seeded faults:
// disconnections, expiries (of a session that no longer holds, as a server
// expires one that has been away), lost replies, and writes applied only
// after the client's next read (testkit's Sim.LateNextWrite). It returns the lock
// and queue histories and what the checks found.
func runSim(t *testing.T, seed uint64, brokenLock bool) *report {
	sim := testkit.NewSim(testkit.WithSeed(int64(seed)), testkit.WithAutoReap())
	t.Cleanup(sim.Close)
	ctx := t.Context()
	s := &suite{t: t, cfg: config{seed: seed, brokenLock: brokenLock}, sim: sim,
		rep: &report{lockHist: newHistory(), fifoHist: newHistory()}, countsM: map[string]int{}}
	obs := sim.Connect()
	defer obs.Close()
	for i := range lockPaths {
		mustCreate(t, ctx, obs, fmt.Sprintf("%s/lock%d", fenceRoot, i))
	}
	runCtx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	prodCtx, stopProducers := context.WithCancel(runCtx)
	defer stopProducers()
	s.startLocks(runCtx)
	if !brokenLock {
		s.fifo = s.startQueue(runCtx, prodCtx, fifoPath, fifoProds, 1, 1, true)
		s.sharded = s.startQueue(runCtx, prodCtx, shardPath, shardProds, 2, shards, false)
	}

	rng := rand.New(rand.NewPCG(seed, 7))
	faults := map[string]int{}
	for deadline := time.Now().Add(simDuration); time.Now().Before(deadline); {
		cl := s.simClients[rng.IntN(len(s.simClients))]
		switch k := rng.IntN(6); k {
		case 0:
			sim.Disconnect(cl.conn)
			wait(ctx, time.Duration(rng.IntN(30))*time.Millisecond)
			sim.Reconnect(cl.conn)
			faults["disconnect"]++
		case 1:
			mark := cl.mark()
			sim.Disconnect(cl.conn)
			if waitSettled(ctx, cl, mark) {
				sim.Expire(cl.conn)
				faults["expire"]++
			} else {
				sim.Reconnect(cl.conn)
			}
		case 2, 3:
			op := testkit.OpCreate
			if k == 3 {
				op = testkit.OpDelete
			}
			f := sim.LoseNextReply(cl.conn, op, cl.prefix)
			select {
			case <-f.Fired():
				faults["lost-"+string(op)+"-reply"]++
			case <-time.After(200 * time.Millisecond):
				f.Disarm()
			}
		case 4, 5:
			// A write applied only after the client's next read: a
			// server behind the leader, after the reconnect.
			op := []testkit.OpKind{testkit.OpCreate, testkit.OpDelete, testkit.OpMulti}[rng.IntN(3)]
			f := sim.LateNextWrite(cl.conn, op, cl.prefix)
			select {
			case <-f.Fired():
				faults["late-"+string(op)]++
			case <-time.After(200 * time.Millisecond):
				if !f.Disarm() {
					faults["late-"+string(op)]++ // taken, applied on the client's next request
				}
			}
		}
		wait(ctx, time.Duration(10+rng.IntN(40))*time.Millisecond)
	}
	t.Logf("simulator faults: %v", faults)

	s.stopProducers(ctx, stopProducers)
	for _, q := range s.queues() {
		s.drain(ctx, obs, q)
	}
	stopWorkers()
	s.wg.Wait()
	closed := time.Now()
	for _, h := range s.locks {
		if err := h.l.Close(); err != nil {
			s.rep.violate("close %s: %v", h.who, err)
		}
	}
	for _, qs := range s.queues() {
		for _, q := range qs.handles {
			q.Close()
		}
		for _, v := range qs.ledger.check() {
			s.rep.violate("%s: %s", qs.path, v)
		}
	}
	if s.fifo != nil {
		s.fifo.history(s.rep.fifoHist)
	}
	var holds []hold
	for _, h := range s.locks {
		hs, problems := h.l.Holds(h.resource, h.who, closed)
		holds = append(holds, hs...)
		for _, p := range problems {
			s.rep.violate("%s", p)
		}
		h.history(s.rep.lockHist, hs)
	}
	for _, v := range checkExclusion(holds, 0) {
		s.rep.violate("%s", v)
	}
	for _, v := range checkFencing(s.fenced) {
		s.rep.violate("%s", v)
	}
	s.logCounts(nil, holds, nil)
	return s.rep
}

// waitSettled waits (up to 2 s) until every handle of cl has handled the
// disconnection since mark and none holds (see client.settled).
func waitSettled(ctx context.Context, cl *client, mark []int) bool {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(2 * time.Second)
	for !cl.settled(mark) {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// TestLinearizableOnSim checks the lock and FIFO queue histories of a
// faulty simulator run with porcupine.
func TestLinearizableOnSim(t *testing.T) {
	seed := chaosSeed(t)
	logSeedOnFailure(t, seed)
	rep := runSim(t, seed, false)
	for _, v := range rep.violations {
		t.Errorf("violation: %s", v)
	}
	checkHistory(t, "sim lock", lockModel, rep.lockHist)
	checkHistory(t, "sim fifo queue", queueModel, rep.fifoHist)
}

// TestLinearizabilityRejectsBrokenLock shows that porcupine rejects the
// history of brokenLock on the simulator.
func TestLinearizabilityRejectsBrokenLock(t *testing.T) {
	seed := chaosSeed(t)
	logSeedOnFailure(t, seed)
	rep := runSim(t, seed, true)
	if len(rep.violations) == 0 {
		t.Errorf("the checks found nothing wrong with the broken lock")
	}
	dir := t.TempDir()
	rejected := 0
	for name, ops := range rep.lockHist.partitions() {
		if res, path := linearizable(lockModel, ops, dir, "broken "+name); res == porcupine.Illegal {
			rejected++
			t.Logf("porcupine rejects the broken lock's history of %s (%d operations); visualisation: %s", name, len(ops), path)
		}
	}
	if rejected == 0 {
		t.Errorf("porcupine accepted every history of the broken lock")
	}
}

// TestQueueModelRejectsReorder shows that the FIFO model rejects a queue
// that hands out items out of order, and one that hands an item out twice,
// and names the visualisation it writes.
func TestQueueModelRejectsReorder(t *testing.T) {
	op := func(client int, in queueInput, out any, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	good := []porcupine.Operation{
		op(0, queueInput{value: "a", seq: 1}, nil, 0, 10),
		op(1, queueInput{value: "b", seq: 2}, nil, 11, 15),
		op(2, queueInput{take: true}, "a", 12, 30),
		op(2, queueInput{take: true}, "b", 31, 40),
	}
	reordered := slices.Clone(good)
	reordered[2].Output, reordered[3].Output = "b", "a"
	twice := slices.Clone(good)
	twice[3].Output = "a"
	dir := t.TempDir()
	if res, path := linearizable(queueModel, good, dir, "good"); res != porcupine.Ok {
		t.Fatalf("a FIFO history is %s; see %s", res, path)
	}
	for name, h := range map[string][]porcupine.Operation{"reordered": reordered, "twice": twice} {
		res, path := linearizable(queueModel, h, dir, name)
		if res != porcupine.Illegal {
			t.Errorf("%s: %s, want Illegal", name, res)
		}
		if !strings.HasSuffix(path, ".html") {
			t.Errorf("%s: no visualisation written: %q", name, path)
		}
	}
	if inv := fifoInversions(reordered); len(inv) == 0 {
		t.Errorf("fifoInversions found nothing in %v", reordered)
	}
}
