package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/fault"
)

// ZooKeeper's client protocol, as far as the proxy needs it. Every message
// is a frame: a 4-byte big-endian length and that many bytes. The first
// frame each way is the session handshake (ConnectRequest, ConnectResponse);
// after it a request starts {xid int32, op int32} and a reply {xid int32,
// zxid int64, err int32}. Watch notifications come with xid -1, ping
// replies with xid -2.

// wireMaxFrame bounds a frame the proxy accepts: the server refuses anything
// above jute.maxbuffer (1 MiB) anyway, so a larger length means the stream
// is not ZooKeeper's protocol.
const wireMaxFrame = 16 << 20

const (
	wireXidPing        int32 = -2
	wireOpCloseSession int32 = -11
	wireOpMulti        int32 = 14
	wireMultiHeader          = 9 // {type int32, done bool, err int32}
)

// wireOpSetWatches are the opcodes (setWatches, setWatches2) a client
// re-sends its watches with after it resumed a session.
var wireOpSetWatches = []int32{101, 105}

// wireKinds maps the request opcodes a reply fault can match to their kind.
var wireKinds = map[int32]fault.OpKind{
	1: fault.OpCreate, 15: fault.OpCreate, 19: fault.OpCreate, // create, create2, createContainer
	2: fault.OpDelete,
	3: fault.OpExists,
	4: fault.OpGet,
	5: fault.OpSet,
	8: fault.OpChildren, 12: fault.OpChildren, // getChildren, getChildren2
	wireOpMulti: fault.OpMulti,
}

// readWireFrame reads one frame and returns it whole, length prefix included,
// ready to be written on.
func readWireFrame(r *bufio.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > wireMaxFrame {
		return nil, fmt.Errorf("proxy: frame of %d bytes is not ZooKeeper's protocol", size)
	}
	frame := make([]byte, 4+size)
	copy(frame, n[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// wireRequest is what the proxy reads from a request frame.
type wireRequest struct {
	xid  int32
	op   int32
	path string // the path of the request, or of a multi's first op; "" if none
}

// parseWireRequest reads a request frame (not the handshake). ok is false when
// the frame is too short to be a request.
func parseWireRequest(frame []byte) (req wireRequest, ok bool) {
	body := frame[4:]
	if len(body) < 8 {
		return wireRequest{}, false
	}
	req.xid = int32(binary.BigEndian.Uint32(body))
	req.op = int32(binary.BigEndian.Uint32(body[4:]))
	args := body[8:]
	if req.op == wireOpMulti {
		// The first op's header; type -1 (or done) ends an empty multi.
		if len(args) < wireMultiHeader || int32(binary.BigEndian.Uint32(args)) == -1 || args[4] != 0 {
			return req, true
		}
		args = args[wireMultiHeader:]
	}
	req.path, _ = readWireString(args)
	return req, true
}

// readWireString reads a jute string or buffer: an int32 length (-1 for null)
// and the bytes.
func readWireString(b []byte) (string, []byte) {
	if len(b) < 4 {
		return "", nil
	}
	n := int32(binary.BigEndian.Uint32(b))
	if n < 0 || int(n) > len(b)-4 {
		return "", b[4:]
	}
	return string(b[4 : 4+n]), b[4+n:]
}

// wireResumesSession reports whether a ConnectRequest frame {protocolVersion
// int32, lastZxidSeen int64, timeOut int32, sessionId int64, ...} asks to
// resume a session rather than to open one.
func wireResumesSession(frame []byte) bool {
	body := frame[4:]
	return len(body) >= 24 && binary.BigEndian.Uint64(body[16:]) != 0
}

// wireReplyXid returns the xid of a reply frame (not the handshake).
func wireReplyXid(frame []byte) (int32, bool) {
	if len(frame) < 8 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(frame[4:])), true
}

// wirePingReply is the reply to a client's ping: xid -2, zxid 0 (clients ignore
// a ping's zxid), no error.
var wirePingReply = func() []byte {
	b := make([]byte, 4+16)
	binary.BigEndian.PutUint32(b, 16)
	xid := wireXidPing
	binary.BigEndian.PutUint32(b[4:], uint32(xid))
	return b
}()

// wireSession is a session's credentials as the server handed them out in a
// ConnectResponse {protocolVersion int32, timeOut int32, sessionId int64,
// passwd buffer}.
type wireSession struct {
	id      int64
	timeout int32
	passwd  []byte
}

func parseWireConnectResponse(frame []byte) (wireSession, bool) {
	body := frame[4:]
	if len(body) < 16 {
		return wireSession{}, false
	}
	s := wireSession{
		timeout: int32(binary.BigEndian.Uint32(body[4:])),
		id:      int64(binary.BigEndian.Uint64(body[8:])),
	}
	if s.id == 0 {
		return wireSession{}, false // the server refused: the session had expired
	}
	passwd, _ := readWireString(body[16:])
	s.passwd = []byte(passwd)
	return s, true
}

// closeWireSession ends session s on the server at addr the way a client's
// Close does, from a connection of its own: it attaches to the session with
// its id and password and sends closeSession. The server deletes the
// session's ephemerals and closes all its connections; from then on a
// client that reconnects with s is told the session expired. (The
// technique of Curator's and kazoo's test kits.)
//
// Attaching moves the session to our connection and makes the server close
// the client's; a client that reattaches at once takes it back and gets our
// connection closed before the close is applied. So every attempt is
// checked by attaching again, which the server refuses once the session is
// gone; callers should keep the client away (a blocked Proxy) meanwhile.
// With tlsCfg it speaks TLS to addr (a secure client port).
func closeWireSession(ctx context.Context, addr string, tlsCfg *tls.Config, s wireSession) error {
	for attempt := 0; attempt < 5; attempt++ {
		gone, err := attachAndClose(ctx, addr, tlsCfg, s)
		if err != nil {
			return err
		}
		if gone {
			if attempt == 0 {
				return fmt.Errorf("%w: 0x%x", ErrSessionGone, s.id)
			}
			return nil
		}
	}
	return fmt.Errorf("proxy: session 0x%x survives closeSession: is its client reconnecting?", s.id)
}

// attachAndClose attaches to s and asks the server to close it. gone
// reports that the server refused to attach: s no longer exists.
func attachAndClose(ctx context.Context, addr string, tlsCfg *tls.Config, s wireSession) (gone bool, err error) {
	var c net.Conn
	if tlsCfg != nil {
		c, err = (&tls.Dialer{Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return false, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	// ConnectRequest {protocolVersion int32, lastZxidSeen int64, timeOut
	// int32, sessionId int64, passwd buffer}.
	connect := binary.BigEndian.AppendUint32(nil, 0)
	connect = binary.BigEndian.AppendUint64(connect, 0)
	connect = binary.BigEndian.AppendUint32(connect, uint32(s.timeout))
	connect = binary.BigEndian.AppendUint64(connect, uint64(s.id))
	connect = binary.BigEndian.AppendUint32(connect, uint32(len(s.passwd)))
	connect = append(connect, s.passwd...)
	closeReq := binary.BigEndian.AppendUint32(nil, 1)
	op := wireOpCloseSession
	closeReq = binary.BigEndian.AppendUint32(closeReq, uint32(op))

	r := bufio.NewReader(c)
	if err := writeWireFrame(c, connect); err != nil {
		return false, err
	}
	resp, err := readWireFrame(r)
	if err != nil {
		return false, fmt.Errorf("proxy: attach to session 0x%x: %w", s.id, err)
	}
	if _, ok := parseWireConnectResponse(resp); !ok {
		return true, nil
	}
	if err := writeWireFrame(c, closeReq); err != nil {
		return false, err
	}
	// The server applies the close (the ephemerals go) and then closes
	// every connection of the session, this one included, without a reply.
	for {
		reply, err := readWireFrame(r)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("proxy: close session 0x%x: %w", s.id, err)
		}
		if xid, _ := wireReplyXid(reply); xid == 1 {
			return false, nil
		}
	}
}

func writeWireFrame(w io.Writer, body []byte) error {
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	_, err := w.Write(append(frame, body...))
	return err
}
