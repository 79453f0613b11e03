package main

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

const serverSynopsis = "zkr server [-port N] [-data DIR]"

// serverCmd runs a standalone ZooKeeper for development (Debian's
// libzookeeper-java, as scripts/install-zookeeper.sh installs it) in the
// foreground: it prints the server's address and stops it at SIGINT or
// SIGTERM.
func serverCmd(e *env, args []string) int {
	fs := newFlags("server")
	port := fs.Int("port", 2181, "client port on 127.0.0.1 (0: a free one)")
	data := fs.String("data", "", "keep the server's data, config and log in DIR across runs (default: a temporary directory, removed at exit)")
	if err := parseFlags(fs, serverSynopsis, e.stderr, args); err != nil {
		return e.fail("server", err)
	}
	if fs.NArg() != 0 || *port < 0 || *port > 65535 {
		return e.fail("server", usagef("usage: %s", serverSynopsis))
	}
	ctx, stop := e.untilSignal()
	defer stop()
	opts := []zkserver.Option{zkserver.WithQuickJIT(true), zkserver.WithPort(*port)}
	if *data != "" {
		opts = append(opts, zkserver.WithDataDir(*data))
	}
	s, err := zkserver.Launch(ctx, opts...)
	if err != nil {
		return e.fail("server", waitErr(ctx, err))
	}
	defer s.Close()
	fmt.Fprintln(e.stdout, s.Addr())
	select {
	case <-ctx.Done():
		return 0
	case <-s.Exited():
		return e.fail("server", fmt.Errorf("ZooKeeper exited; log tail:\n%s", s.LogTail(30)))
	}
}
