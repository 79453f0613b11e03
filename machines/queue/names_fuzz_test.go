package queue

import (
	"fmt"
	"testing"
)

// FuzzItemNames: the item parser never panics, and a name it accepts is
// the one a create of that priority makes for that sequence (ZooKeeper's
// %010d of the signed counter, or ten digits), so no two names parse to
// one item.
func FuzzItemNames(f *testing.F) {
	for _, s := range []string{
		"qn-0000000007", "qn-0000000003-0000000007", "qn--2147483648", "qn--000000001",
		"qn-0000000003--2147483647", "qn-2147483647", "qn-4294967295", "qn-", "qn--", "qn-0000000003-", "claim", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, ok := parseItem(name)
		if !ok {
			return
		}
		seq := fmt.Sprintf("%010d", int32(n.seq))
		for _, want := range []string{itemPrefix(n.prio, false) + seq, itemPrefix(n.prio, true) + seq} {
			if want == name {
				return
			}
		}
		t.Fatalf("%q parses as prio %d seq %d, which no create names so", name, n.prio, n.seq)
	})
}
