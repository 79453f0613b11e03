//go:build !linux && !darwin

package main

import "time"

// sleepFor sleeps for d on a Go timer.
func sleepFor(d time.Duration) { time.Sleep(d) }
