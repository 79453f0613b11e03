package testkit

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/internal/opstream"
)

var allOpStreams = flag.Bool("opstreams.all", false, "TestOpStreams: run every FuzzOps corpus entry on the real server too, not only the first 16")

// TestOpStreams runs the simulator's fuzz streams (testkit/sim's FuzzOps:
// the hand-written seeds and the corpus the fuzzer kept) on every target
// and expects the same result from each, op by op: error kinds, created
// names, Stat fields with zxids relative to the stream's root. A stream
// whose results differ found a bug in the simulator (or in the server's
// documentation of itself). The real server runs the seeds and the first
// 16 corpus entries (all with -opstreams.all); entries that start the root's
// sequence counter elsewhere than 0 run only on the simulator, which can.
func TestOpStreams(t *testing.T) {
	type stream struct {
		name string
		ops  []opstream.Op
	}
	var streams []stream
	for i, s := range opstream.Seeds() {
		streams = append(streams, stream{fmt.Sprintf("seed%d", i), s})
	}
	corpus, err := filepath.Glob(filepath.Join("sim", "testdata", "fuzz", "FuzzOps", "*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(corpus)
	kept := 0
	for _, f := range corpus {
		b, seq, err := readOpsCorpus(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if seq != 0 || (kept >= 16 && !*allOpStreams) {
			continue
		}
		kept++
		streams = append(streams, stream{filepath.Base(f), opstream.Decode(b)})
	}
	for _, s := range streams {
		t.Run(s.name, func(t *testing.T) {
			logs := map[string][]string{}
			ForEachTarget(t, func(t *testing.T, tg Target) {
				logs[tg.Name()] = runStream(t, tg, s.ops)
			})
			a, b := logs["sim"], logs["zk"]
			if a == nil || b == nil {
				return // a target did not run (or failed on its own)
			}
			for i := range max(len(a), len(b)) {
				var x, y string
				if i < len(a) {
					x = a[i]
				}
				if i < len(b) {
					y = b[i]
				}
				if x != y {
					t.Fatalf("op %d differs:\n  sim: %s\n  zk:  %s\nthe stream so far:\n  %s", i, x, y, strings.Join(b[:i], "\n  "))
				}
			}
		})
	}
}

// readOpsCorpus reads a FuzzOps corpus file: the stream's bytes and the
// root's first sequence number.
func readOpsCorpus(path string) ([]byte, int32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	var b []byte
	var seq int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "[]byte(") && strings.HasSuffix(line, ")"):
			s, err := strconv.Unquote(line[len("[]byte(") : len(line)-1])
			if err != nil {
				return nil, 0, fmt.Errorf("%q: %w", line, err)
			}
			b = []byte(s)
		case strings.HasPrefix(line, "int32(") && strings.HasSuffix(line, ")"):
			if seq, err = strconv.ParseInt(line[len("int32("):len(line)-1], 0, 32); err != nil {
				return nil, 0, fmt.Errorf("%q: %w", line, err)
			}
		}
	}
	return b, int32(seq), sc.Err()
}

// targetEnv runs a stream on a target's sessions.
type targetEnv struct {
	t     *testing.T
	tg    Target
	conns []zk.Conn
}

func (e targetEnv) Conn(i int) zk.Conn { return e.conns[i] }
func (e targetEnv) Bounce(i int) {
	e.tg.Disconnect(e.t, e.conns[i])
	e.tg.Reconnect(e.t, e.conns[i])
}
func (e targetEnv) Expire(i int) { e.tg.Expire(e.t, e.conns[i]) }

func runStream(t *testing.T, tg Target, ops []opstream.Op) []string {
	env := targetEnv{t: t, tg: tg}
	for range opstream.Sessions {
		env.conns = append(env.conns, tg.Connect(t))
	}
	r, err := opstream.Start(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for _, op := range ops {
		log = append(log, r.Do(t.Context(), op).Line)
	}
	return log
}
