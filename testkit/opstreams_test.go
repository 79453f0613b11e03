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
// 16 corpus entries (all with -opstreams.all), each with the root's
// sequence counter at 0 (FuzzOps' second argument moves it on the
// simulator only: a real server's counter cannot be set).
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
		b, err := readOpsCorpus(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if kept >= 16 && !*allOpStreams {
			break
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

// readOpsCorpus reads the stream's bytes from a FuzzOps corpus file.
func readOpsCorpus(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "[]byte(") && strings.HasSuffix(line, ")") {
			s, err := strconv.Unquote(line[len("[]byte(") : len(line)-1])
			if err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
			return []byte(s), nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no []byte line")
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
