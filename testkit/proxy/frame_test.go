package proxy

import (
	"encoding/binary"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseWireRequest(t *testing.T) {
	str := func(s string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...)
	}
	full := func(xid, op int32, body ...[]byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(xid))
		b = binary.BigEndian.AppendUint32(b, uint32(op))
		for _, x := range body {
			b = append(b, x...)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	multiHdr := func(typ int32, done bool) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(typ))
		if done {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		return binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
		want  wireRequest
	}{
		{"create2", full(7, 15, str("/a/b"), str("data")), true, wireRequest{7, 15, "/a/b"}},
		{"getChildren2", full(8, 12, str("/"), []byte{1}), true, wireRequest{8, 12, "/"}},
		{"multi", full(9, 14, multiHdr(2, false), str("/x/y"), multiHdr(-1, true)), true, wireRequest{9, 14, "/x/y"}},
		{"empty multi", full(10, 14, multiHdr(-1, true)), true, wireRequest{10, 14, ""}},
		{"ping", full(-2, 11), true, wireRequest{-2, 11, ""}},
		{"truncated path", full(11, 4, []byte{0, 0, 0, 9, '/'}), true, wireRequest{11, 4, ""}},
		{"short", []byte{0, 0, 0, 4, 0, 0, 0, 1}, false, wireRequest{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseWireRequest(tc.frame)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("parseWireRequest = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
