package zk

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	gozk "github.com/go-zookeeper/zk"
)

// Errors of this implementation, beside the sentinels every Conn uses.
var (
	// ErrNoServers: Connect was given no server address, or an empty one.
	ErrNoServers = errors.New("zk: no server address given")
	// ErrUnexpected: the server or go-zookeeper reported an error none of
	// the other sentinels describes (for example ZooKeeper's SystemError,
	// or a quota or throttling error); the message carries the original.
	ErrUnexpected = errors.New("zk: unexpected error")
)

// gozkErrors maps go-zookeeper's error values to ours, in the order they
// are tried with errors.Is.
var gozkErrors = []struct{ from, to error }{
	{gozk.ErrNoNode, ErrNoNode},
	{gozk.ErrNodeExists, ErrNodeExists},
	{gozk.ErrNotEmpty, ErrNotEmpty},
	{gozk.ErrBadVersion, ErrBadVersion},
	{gozk.ErrNoChildrenForEphemerals, ErrNoChildrenForEphemerals},
	{gozk.ErrBadArguments, ErrBadArguments},
	{gozk.ErrInvalidACL, ErrBadArguments},
	{gozk.ErrInvalidFlags, ErrBadArguments},
	{gozk.ErrShortBuffer, ErrRequestTooLarge}, // go-zookeeper's send buffer; nothing was sent
	{gozk.ErrInvalidPath, ErrInvalidPath},
	{gozk.ErrNoAuth, ErrNoAuth},
	{gozk.ErrAuthFailed, ErrAuthFailed},
	{gozk.ErrSessionExpired, ErrSessionExpired},
	{gozk.ErrConnectionClosed, ErrConnectionLoss},
	{gozk.ErrNoServer, ErrConnectionLoss},
	{gozk.ErrSessionMoved, ErrConnectionLoss}, // the request went to a server the session had left
	{gozk.ErrClosing, ErrClosed},
}

// serverCodes maps the ZooKeeper error codes go-zookeeper does not know
// (it reports them as "unknown error: <code>") to ours.
var serverCodes = map[int]error{
	-2:   ErrRuntimeInconsistency, // a multi op skipped because an earlier op failed
	-4:   ErrConnectionLoss,
	-6:   ErrUnimplemented,
	-7:   ErrConnectionLoss, // OperationTimeout: the outcome is unknown
	-8:   ErrBadArguments,
	-122: ErrConnectionLoss, // RequestTimeout: the outcome is unknown
}

// sentinel returns the sentinel err corresponds to.
func sentinel(err error) error {
	for _, m := range gozkErrors {
		if errors.Is(err, m.from) {
			return m.to
		}
	}
	if s, ok := strings.CutPrefix(err.Error(), "unknown error: "); ok {
		if code, convErr := strconv.Atoi(s); convErr == nil {
			if to, ok := serverCodes[code]; ok {
				return to
			}
		}
		return ErrUnexpected
	}
	// A write to the socket failed: the request may or may not have gone out.
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		return ErrConnectionLoss
	}
	return ErrUnexpected
}

// mapErr translates an error from go-zookeeper into one that matches one of
// this package's sentinels with errors.Is. When the original says something
// the sentinel does not, its text is kept after the sentinel's.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	s := sentinel(err)
	if s.Error() == err.Error() || s == ErrRequestTooLarge { // go-zookeeper's "buffer too small" says less than ours
		return s
	}
	return fmt.Errorf("%w: %v", s, err)
}
