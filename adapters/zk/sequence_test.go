package zk

import (
	"fmt"
	"math"
	"testing"
)

func TestParseSequence(t *testing.T) {
	for _, tc := range []struct {
		suffix string
		seq    int32
		ok     bool
	}{
		{"0000000000", 0, true},
		{"0000000042", 42, true},
		{"1000000000", 1000000000, true},
		{"2147483647", math.MaxInt32, true},
		// After the wrap: eleven characters down to -1000000000, then ten.
		{"-2147483648", math.MinInt32, true},
		{"-2147483647", -2147483647, true},
		{"-1000000000", -1000000000, true},
		{"-999999999", -999999999, true},
		{"-099999999", -99999999, true},
		{"-000000001", -1, true},
		// Forms %010d never writes.
		{"2147483648", 0, false},
		{"-2147483649", 0, false},
		{"+000000001", 0, false},
		{"-000000000", 0, false},
		{"-0000000000", 0, false},
		{"-0000000001", 0, false},
		{"-0999999999", 0, false},
		{"00000000001", 0, false},
		{"12345678901", 0, false},
		{"000000001", 0, false},
		{"-00000001", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"000000000x", 0, false},
		{"00000 0001", 0, false},
		{"0_00000001", 0, false},
		{"--00000001", 0, false},
		{"0-00000001", 0, false},
		{"-+00000001", 0, false},
		{"٠٠٠٠٠٠٠٠٠١", 0, false},
	} {
		seq, ok := ParseSequence(tc.suffix)
		if seq != tc.seq || ok != tc.ok {
			t.Errorf("ParseSequence(%q) = %d, %t; want %d, %t", tc.suffix, seq, ok, tc.seq, tc.ok)
		}
		if ok && fmt.Sprintf("%010d", seq) != tc.suffix {
			t.Errorf("ParseSequence(%q) accepts what ZooKeeper writes as %010d", tc.suffix, seq)
		}
	}
}

func TestCompareSequence(t *testing.T) {
	for _, tc := range []struct {
		a, b int32
		want int
	}{
		{1, 2, -1},
		{2, 1, 1},
		{7, 7, 0},
		{-1, 0, -1},
		// Across the wrap: the negative sequences come after the largest.
		{math.MaxInt32, math.MinInt32, -1},
		{math.MinInt32, math.MaxInt32, 1},
		{math.MaxInt32 - 5, math.MinInt32 + 5, -1},
		// Half the circle apart: no order either way.
		{0, math.MinInt32, 0},
		{math.MinInt32, 0, 0},
		{5, math.MinInt32 + 5, 0},
		// Just under half: -2147483648 is 2^31-1 after 1.
		{1, math.MinInt32, -1},
		{math.MinInt32, 1, 1},
	} {
		if got := CompareSequence(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareSequence(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
