package contention

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// FuzzNodeNames: the sequence parser never panics; a name it accepts ends
// with a marker and the sequence it reads, written back as ZooKeeper
// writes it (%010d, eleven characters across the wrap), so Curator's,
// kazoo's and the ZooKeeper recipes' names parse alike and the wrap is
// read as a serial number.
func FuzzNodeNames(f *testing.F) {
	for _, s := range []string{
		"_c_0f0f0f0f-1111-2222-3333-444444444444-lock-0000000001", // Curator, zkrecipes
		"_c_x-__READ__0000000012", "_c_x-__WRIT__2147483647",      // Curator's read/write lock
		"_c_x-lock--2147483648", "_c_x-lock--0000000001", "lock-2147483647", // across the wrap
		"a1b2c3d4__lock__0000000003", "qn-0000000007", "x-lock-000000000a", "lock-", "",
	} {
		f.Add(s, "lock-")
	}
	f.Add("_c_x-__READ__0000000012", "__READ__")
	f.Add("a1b2c3d4__lock__0000000003", "__lock__")
	f.Fuzz(func(t *testing.T, name, marker string) {
		if marker == "" {
			return
		}
		suffix, seq, ok := splitSeq(name, []string{marker})
		if !ok {
			return
		}
		if !strings.HasSuffix(name, suffix) || !strings.HasSuffix(strings.TrimSuffix(name, suffix), marker) {
			t.Fatalf("%q: suffix %q after marker %q?", name, suffix, marker)
		}
		if got := fmt.Sprintf("%010d", seq); got != suffix {
			t.Fatalf("%q: read %d from %q, which ZooKeeper writes %q", name, seq, suffix, got)
		}
	})
}

// FuzzHolding: over any listing, Contenders keeps only contender names,
// in serial order of their sequences, and Holding is a subset of them
// that the predicate allows: one exclusive holder (or several sharing its
// sequence), no reader beside a writer below it, at most n leases.
func FuzzHolding(f *testing.F) {
	f.Add("_c_a-lock-0000000001 _c_b-lock-0000000002 qn-0000000003", uint8(0), uint8(2))
	f.Add("_c_w-__WRIT__0000000003 _c_r-__READ__0000000003 _c_x-__WRIT__0000000004 _c_y-__READ__0000000001", uint8(1), uint8(1))
	f.Add("_c_a-lock-2147483647 _c_b-lock--2147483648 _c_c-lock--2147483647", uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, listing string, kind, n uint8) {
		children := strings.Fields(listing)
		markers := []string{"lock-"}
		p := Exclusive()
		switch kind % 3 {
		case 1:
			markers, p = []string{"__WRIT__", "__READ__"}, ReadWrite("__READ__")
		case 2:
			p = Leases(int(n%5) + 1)
		}
		queue := Contenders(children, markers)
		for i, c := range queue {
			if !slices.Contains(children, c) {
				t.Fatalf("Contenders made up %q", c)
			}
			if i > 0 {
				a, _ := parseSeq(queue[i-1], markers)
				b, _ := parseSeq(c, markers)
				if zk.CompareSequence(a, b) > 0 {
					t.Fatalf("Contenders out of order: %q before %q", queue[i-1], c)
				}
			}
		}
		holding := Holding(children, markers, p)
		seqs := map[int32]bool{}
		for _, h := range holding {
			if !slices.Contains(queue, h) {
				t.Fatalf("Holding made up %q", h)
			}
			s, _ := parseSeq(h, markers)
			seqs[s] = true
		}
		switch {
		case p.kind == exclusive && len(seqs) > 1:
			t.Fatalf("exclusive: holders %q", holding)
		case p.kind == leases && len(holding) > p.leases && len(seqs) > p.leases:
			t.Fatalf("leases(%d): holders %q", p.leases, holding)
		case p.kind == readWrite:
			for _, h := range holding {
				if p.isReader(h) {
					continue
				}
				hs, _ := parseSeq(h, markers)
				for _, o := range holding {
					os, _ := parseSeq(o, markers)
					if o != h && os != hs {
						t.Fatalf("read/write: writer %q holds beside %q", h, o)
					}
				}
			}
		}
	})
}

// FuzzSequenceNames builds the names other libraries' recipes create —
// Apache Curator's (protected _c_<uuid>- names: lock-, latch-, lease-,
// __READ__, __WRIT__), kazoo's (<uuid hex>__lock__, __rlock__) and the
// ZooKeeper recipes' (WriteLock's x-<session>-, LeaderElectionSupport's
// n_, the lock recipe's <guid>-lock-) — with any id and any sequence the
// server can write (%010d of its signed 32-bit counter: eleven characters
// from -2147483648, which follows 2147483647). The parser reads back that
// sequence from each, and Contenders puts a run of consecutive sequences,
// listed in any order, back in creation order across the wrap.
func FuzzSequenceNames(f *testing.F) {
	f.Add(uint8(0), "0f0f0f0f-1111-2222-3333-444444444444", int32(1), uint8(3), uint64(0))
	f.Add(uint8(2), "x", int32(2147483646), uint8(4), uint64(7))
	f.Add(uint8(4), "a1b2c3d4", int32(-2147483648), uint8(2), uint64(1))
	f.Add(uint8(5), "72057594037927937", int32(-1), uint8(3), uint64(3))
	f.Add(uint8(6), "", int32(2147483647), uint8(9), uint64(5))
	f.Add(uint8(7), "guid", int32(-2147483647), uint8(1), uint64(2))
	f.Fuzz(func(t *testing.T, family uint8, id string, seq int32, run uint8, shuffle uint64) {
		prefix, markers := sequenceFamily(family, id)
		if prefix == "" {
			return
		}
		name := func(s int32) string { return prefix + fmt.Sprintf("%010d", s) }
		suffix, got, ok := splitSeq(name(seq), markers)
		if !ok || got != seq || suffix != fmt.Sprintf("%010d", seq) {
			t.Fatalf("%q (markers %q): read %q %d %t, want sequence %d", name(seq), markers, suffix, got, ok, seq)
		}
		n := int(run%16) + 1
		want := make([]string, n)
		for i := range want {
			want[i] = name(int32(uint32(seq) + uint32(i))) // the server's counter wraps
		}
		listed := slices.Clone(want)
		for i := len(listed) - 1; i > 0; i-- { // a shuffle from the fuzzer's bits
			shuffle = shuffle*6364136223846793005 + 1442695040888963407
			j := int(shuffle>>33) % (i + 1)
			listed[i], listed[j] = listed[j], listed[i]
		}
		if got := Contenders(listed, markers); !slices.Equal(got, want) {
			t.Fatalf("Contenders(%q) = %q, want creation order %q", listed, got, want)
		}
	})
}

// sequenceFamily returns the prefix (everything before the sequence) that
// family's recipe gives a node of participant id, and the markers that
// recognise its nodes; "" for an id that recipe cannot produce.
func sequenceFamily(family uint8, id string) (prefix string, markers []string) {
	hexID := strings.Trim(id, "0123456789abcdef") == ""
	switch family % 10 {
	case 0: // Curator InterProcessMutex, LeaderSelector; ours
		return "_c_" + id + "-lock-", []string{"lock-"}
	case 1: // Curator LeaderLatch, beside LeaderSelector's (our election's markers)
		return "_c_" + id + "-latch-", []string{"latch-", "lock-"}
	case 2: // Curator InterProcessReadWriteLock, reader
		return "_c_" + id + "-__READ__", []string{"__WRIT__", "__READ__"}
	case 3: // Curator InterProcessReadWriteLock, writer
		return "_c_" + id + "-__WRIT__", []string{"__WRIT__", "__READ__"}
	case 4: // kazoo Lock (uuid4().hex + "__lock__")
		if !hexID {
			return "", nil
		}
		return id + "__lock__", []string{"__lock__", "__rlock__"}
	case 5: // ZooKeeper's WriteLock recipe: x-<session id>-<seq>
		if id == "" || strings.Trim(id, "0123456789") != "" {
			return "", nil
		}
		return "x-" + id + "-", []string{"-"}
	case 6: // ZooKeeper's LeaderElectionSupport: n_<seq>
		return "n_", []string{"n_"}
	case 7: // ZooKeeper's lock recipe as documented: <guid>-lock-<seq>
		return id + "-lock-", []string{"lock-"}
	case 8: // Curator InterProcessSemaphoreV2's leases
		return "_c_" + id + "-lease-", []string{"lease-"}
	default: // kazoo ReadLock
		if !hexID {
			return "", nil
		}
		return id + "__rlock__", []string{"__lock__", "__rlock__"}
	}
}
