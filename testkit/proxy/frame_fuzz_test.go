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
	f.Add(append(req(4, 4, str("/a")), req(5, 8, str("/b"))...))
	f.Fuzz(func(t *testing.T, wire []byte) {
		// A stream of frames reads back frame by frame, each whole, until
		// the bytes run out or stop being frames.
		r := bufio.NewReader(bytes.NewReader(wire))
		var read []byte
		for {
			frame, err := readWireFrame(r)
			if err != nil {
				break
			}
			read = append(read, frame...)
		}
		if !bytes.HasPrefix(wire, read) {
			t.Fatalf("the frames read are not the stream's bytes")
		}
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

// FuzzWireRoundTrip: what the client and the server write, the proxy reads
// back as written: a request's xid, opcode and path (a multi's first op's),
// a ConnectResponse's session id, timeout and password, whether a
// ConnectRequest resumes a session, a reply's xid; and a frame it writes
// reads back whole.
func FuzzWireRoundTrip(f *testing.F) {
	f.Add(int32(1), int32(1), "/a/_c_x-lock-", int64(0x0100000000000001), []byte("0123456789abcdef"), int32(4000))
	f.Add(int32(-2), wireOpMulti, "/", int64(-1), []byte{}, int32(0))
	f.Add(int32(7), int32(8), "", int64(0), []byte(nil), int32(-1))
	f.Fuzz(func(t *testing.T, xid, op int32, path string, id int64, passwd []byte, timeout int32) {
		str := func(b []byte, s string) []byte { return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...) }
		body := binary.BigEndian.AppendUint32(nil, uint32(xid))
		body = binary.BigEndian.AppendUint32(body, uint32(op))
		if op == wireOpMulti {
			body = append(body, 0, 0, 0, 2, 0, 255, 255, 255, 255) // a delete, not done
		}
		body = str(body, path)
		body = binary.BigEndian.AppendUint32(body, uint32(0xffffffff)) // a version
		var w bytes.Buffer
		if err := writeWireFrame(&w, body); err != nil {
			t.Fatal(err)
		}
		frame, err := readWireFrame(bufio.NewReader(bytes.NewReader(w.Bytes())))
		if err != nil || !bytes.Equal(frame, w.Bytes()) {
			t.Fatalf("a written frame reads back as %x, %v", frame, err)
		}
		r, ok := parseWireRequest(frame)
		if !ok || r.xid != xid || r.op != op || r.path != path {
			t.Fatalf("request {%d %d %q} parses as %+v %t", xid, op, path, r, ok)
		}
		if x, ok := wireReplyXid(frame); !ok || x != xid {
			t.Fatalf("xid %d read as %d %t", xid, x, ok)
		}

		resp := binary.BigEndian.AppendUint32(nil, 0)
		resp = binary.BigEndian.AppendUint32(resp, uint32(timeout))
		resp = binary.BigEndian.AppendUint64(resp, uint64(id))
		resp = str(resp, string(passwd))
		w.Reset()
		if err := writeWireFrame(&w, resp); err != nil {
			t.Fatal(err)
		}
		s, ok := parseWireConnectResponse(w.Bytes())
		switch {
		case id == 0 && ok:
			t.Fatalf("a refused session (id 0) parses as %+v", s)
		case id != 0 && (!ok || s.id != id || s.timeout != timeout || !bytes.Equal(s.passwd, passwd)):
			t.Fatalf("session {%d %d %x} parses as %+v %t", id, timeout, passwd, s, ok)
		}

		creq := binary.BigEndian.AppendUint32(nil, 0)
		creq = binary.BigEndian.AppendUint64(creq, 0)
		creq = binary.BigEndian.AppendUint32(creq, uint32(timeout))
		creq = binary.BigEndian.AppendUint64(creq, uint64(id))
		creq = str(creq, string(passwd))
		w.Reset()
		if err := writeWireFrame(&w, creq); err != nil {
			t.Fatal(err)
		}
		if got := wireResumesSession(w.Bytes()); got != (id != 0) {
			t.Fatalf("ConnectRequest with session %d: resumes %t", id, got)
		}
	})
}
