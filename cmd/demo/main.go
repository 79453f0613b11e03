// Command demo is a tour of zkrecipes: workers contending on a lock,
// participants electing a leader while the leader resigns and then
// crashes, readers and writers sharing a read/write lock, and workers
// sharing the leases of a semaphore while a holder's session ends, and
// consumers acking the items of a work queue while one crashes holding an
// item, and workers starting and finishing together on a double barrier
// while one crashes inside. It
// prints every lifecycle event as it happens and ends with a
// summary.
//
//	go run ./cmd/demo                          # on the embedded simulator
//	go run ./cmd/demo -zk 127.0.0.1:2181       # on a real server or ensemble
//	go run ./cmd/demo -scenario lock -workers 8 -rounds 5
//	go run ./cmd/demo -scenario semaphore      # 8 workers, 3 leases
//	go run ./cmd/demo -scenario queue -orders 20
//	go run ./cmd/demo -scenario barrier
//	go run ./cmd/demo -scenario 2pc
//	go run ./cmd/demo -trace-json /tmp/demo.json # then open it in ui.perfetto.dev
//
// Each worker and participant has its own session, as separate processes
// would. The exit code is 0 when every check held (one holder at a time,
// a leader after each change, never more holders than leases and the
// lease of an ended session back, every queue item acked exactly once),
// 1 otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

func main() {
	addr := flag.String("zk", "", "ZooKeeper servers, host:port[,host:port...]; empty: the embedded simulator")
	scenario := flag.String("scenario", "all", "lock, election, rwlock, semaphore, queue, barrier, 2pc or all")
	workers := flag.Int("workers", 5, "lock: workers contending on one lock")
	rounds := flag.Int("rounds", 3, "lock, semaphore: acquisitions per worker")
	traceJSON := flag.String("trace-json", "", "write every event as Chrome Trace Event JSON to this file (opens in ui.perfetto.dev)")
	orders := flag.Int("orders", 6, "queue: items each of the 2 producers offers")
	hold := flag.Duration("hold", 5*time.Millisecond, "lock, semaphore, queue: how long a worker holds the lock or a lease, or works on an item")
	flag.Parse()
	if *workers < 1 || *rounds < 1 || *orders < 1 || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	c := &cluster{sim: sim.New(), where: "the embedded simulator"}
	if *addr != "" {
		c = &cluster{servers: strings.Split(*addr, ","), where: "ZooKeeper " + *addr}
	}
	p := newPrinter(os.Stdout)
	p.collect = *traceJSON != ""
	p.key()
	var err error
	switch *scenario {
	case "lock":
		err = lockScenario(ctx, c, p, *workers, *rounds, *hold)
	case "election":
		err = electionScenario(ctx, c, p)
	case "rwlock":
		err = rwlockScenario(ctx, c, p)
	case "semaphore":
		err = semaphoreScenario(ctx, c, p, *rounds, *hold)
	case "queue":
		err = queueScenario(ctx, c, p, *orders, *hold)
	case "barrier":
		err = barrierScenario(ctx, c, p, *hold)
	case "2pc":
		err = twophaseScenario(ctx, c, p)
	case "all":
		if err = lockScenario(ctx, c, p, *workers, *rounds, *hold); err == nil {
			if err = electionScenario(ctx, c, p); err == nil {
				err = semaphoreScenario(ctx, c, p, *rounds, *hold)
			}
		}
		if err == nil {
			err = rwlockScenario(ctx, c, p)
		}
		if err == nil {
			err = queueScenario(ctx, c, p, *orders, *hold)
		}
		if err == nil {
			err = barrierScenario(ctx, c, p, *hold)
		}
		if err == nil {
			err = twophaseScenario(ctx, c, p)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
	if *traceJSON != "" {
		if terr := writeTrace(p, *traceJSON); terr != nil {
			err = errors.Join(err, terr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// writeTrace writes the events the printer kept to file.
func writeTrace(p *printer, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := p.trace(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cluster is where the demo runs: the simulator or real servers.
type cluster struct {
	sim     *sim.Sim
	servers []string
	where   string
}

// connect opens a new session.
func (c *cluster) connect(ctx context.Context) (zk.Conn, error) {
	if c.sim != nil {
		return c.sim.Connect(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return zk.Connect(ctx, c.servers, zk.WithSessionTimeout(4*time.Second))
}

// crash ends conn's session without its owner resigning or releasing
// anything: the simulator expires it, as the server does when a process
// stops answering; on a real server the connection is closed, and the
// server deletes the session's nodes at once.
func (c *cluster) crash(conn zk.Conn) string {
	if c.sim != nil {
		c.sim.Expire(conn)
		return "its session expired"
	}
	conn.Close()
	return "its connection closed"
}
