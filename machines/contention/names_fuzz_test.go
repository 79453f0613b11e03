package contention

import (
	"fmt"
	"slices"
	"strings"
	"testing"
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
				if seqBefore(b, a) && !seqBefore(a, b) {
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
