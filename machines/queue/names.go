package queue

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Prefix starts every item's name: the prefix of ZooKeeper's recipe queue
// and of Curator's SimpleDistributedQueue.
const Prefix = "qn-"

// ClaimName is the name of an acknowledged consumer's claim on an item: an
// ephemeral child of the item node.
const ClaimName = "claim"

// MaxPriority is the largest priority OfferPriority accepts.
const MaxPriority = 9_999_999_999

// itemName is one item's place in the queue, parsed from its node name:
// qn-<seq10> for a plain item (priority 0), qn-<prio10>-<seq10> for one
// offered with a priority.
type itemName struct {
	name string
	prio int64
	seq  uint32
}

// itemPrefix is the name prefix an item of priority prio is created with;
// the server appends the 10-digit sequence.
func itemPrefix(prio int64, priority bool) string {
	if !priority {
		return Prefix
	}
	return fmt.Sprintf("%s%010d-", Prefix, prio)
}

// parseItem parses a child's name; ok is false for a child that is not an
// item. The sequence is ZooKeeper's: a signed 32-bit counter written
// %010d, so after 2147483647 come -2147483648 (eleven characters) up to
// -000000001; it is read as the unsigned serial number that continues the
// order across the wrap.
func parseItem(name string) (itemName, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return itemName{}, false
	}
	var prio int64
	if len(rest) >= 21 && rest[10] == '-' {
		p, ok := digits(rest[:10])
		if !ok {
			return itemName{}, false
		}
		prio, rest = p, rest[11:]
	}
	seq, ok := zk.ParseSequence(rest)
	if !ok {
		return itemName{}, false
	}
	return itemName{name: name, prio: prio, seq: uint32(seq)}, true
}

// digits parses a run of ASCII digits (ParseUint takes no sign), ten at
// most here.
func digits(s string) (int64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return int64(n), err == nil
}

// compareItems orders items: lower priority first, then by sequence,
// compared as serial numbers (a wrapped counter stays in order).
func compareItems(a, b itemName) int {
	if c := cmp.Compare(a.prio, b.prio); c != 0 {
		return c
	}
	return zk.CompareSequence(int32(a.seq), int32(b.seq))
}
