package zk

import (
	"cmp"
	"math"
	"strconv"
	"strings"
)

// ParseSequence reads the suffix a sequential create appends to the name:
// the parent's signed 32-bit counter written %010d. That is ten digits up
// to 2147483647 and, once the counter wrapped, -2147483648 (eleven
// characters) up to -000000001. It accepts exactly those forms: no plus
// sign, no negative zero, no extra zero padding, no other length.
func ParseSequence(suffix string) (int32, bool) {
	digits, neg := strings.CutPrefix(suffix, "-")
	fits := len(suffix) == 10 || neg && len(suffix) == 11 && digits[0] != '0'
	if !fits || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(suffix, 10, 32)
	if err != nil || neg && n == 0 {
		return 0, false
	}
	return int32(n), true
}

// CompareSequence orders sequences a and b as 32-bit serial numbers, so
// that the wrap from 2147483647 to -2147483648 keeps the order: -1 when a
// comes before b, +1 when after. It is 0 for equal sequences and for two
// exactly 2^31 apart, whose order is undefined.
func CompareSequence(a, b int32) int {
	d := int32(uint32(a) - uint32(b))
	if d == math.MinInt32 {
		return 0
	}
	return cmp.Compare(d, 0)
}
