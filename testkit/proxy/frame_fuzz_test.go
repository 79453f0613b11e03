package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzWireFrames: whatever bytes come on the wire, the proxy's frame reader
// and parsers never panic; a frame read whole has the length it announced,
// and a parsed request's path is a piece of its frame.
func FuzzWireFrames(f *testing.F) {
	req := func(xid, op int32, args []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(8+len(args)))
		b = binary.BigEndian.AppendUint32(b, uint32(xid))
		b = binary.BigEndian.AppendUint32(b, uint32(op))
		return append(b, args...)
	}
	str := func(s string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...) }
	f.Add(req(1, 1, str("/a/_c_x-lock-")))
	f.Add(req(2, wireOpMulti, append([]byte{0, 0, 0, 1, 0, 255, 255, 255, 255}, str("/a/b")...)))
	f.Add(req(3, 3, []byte{255, 255, 255, 255}))
	f.Add([]byte{0, 0, 0, 2, 1})
	f.Add([]byte{255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, wire []byte) {
		frame, err := readWireFrame(bufio.NewReader(bytes.NewReader(wire)))
		if err != nil {
			return
		}
		if n := binary.BigEndian.Uint32(frame); int(n)+4 != len(frame) {
			t.Fatalf("frame of %d bytes announced %d", len(frame), n)
		}
		if r, ok := parseWireRequest(frame); ok && r.path != "" && !bytes.Contains(frame, []byte(r.path)) {
			t.Fatalf("path %q is not in the frame", r.path)
		}
		parseWireConnectResponse(frame)
		wireReplyXid(frame)
		wireResumesSession(frame)
	})
}
