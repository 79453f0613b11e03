package zk

import (
	"fmt"
	"strings"
)

// ParseConnectString splits ZooKeeper's connect string
// "host1:port1,host2:port2/chroot" into its servers (as written; Connect
// defaults a missing port to 2181) and its chroot, for Connect and
// WithChroot. A chroot of "/", or none, is "". An empty server, or a
// chroot ValidatePath refuses, is an error (ErrNoServers, ErrInvalidOption).
func ParseConnectString(s string) (servers []string, chroot string, err error) {
	hosts := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], s[i:]
		if err := ValidatePath(chroot); err != nil {
			return nil, "", fmt.Errorf("%w: connect string's chroot: %w", ErrInvalidOption, err)
		}
		if chroot == "/" {
			chroot = ""
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, "", fmt.Errorf("%w: empty server in connect string %q", ErrNoServers, s)
		}
		servers = append(servers, h)
	}
	return servers, chroot, nil
}
