//go:build linux || darwin

package main

import (
	"syscall"
	"time"
)

// sleepFor blocks the OS thread for d (nanosleep), off the Go timers.
func sleepFor(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
