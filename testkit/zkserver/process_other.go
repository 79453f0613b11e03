//go:build !linux

package zkserver

import "syscall"

// sysProcAttr has nothing to add outside Linux: there, a JVM can outlive a
// test binary that crashed before its cleanup ran.
func sysProcAttr() *syscall.SysProcAttr { return nil }
