package main

import "time"

// work stands for the work done under a lock or lease: it keeps the hold
// for d, as the peers' hold does (Curator parks, kazoo sleeps), with a
// sleep of the OS thread (sleepFor) for all but the last 50 µs when d is
// at least 200 µs, then a spin to the end. A Go timer's sleep would do on
// an idle machine, but under this load it wakes late (holds of 1 ms lasted
// 1.6 to 1.9 ms), which a bench of hand-overs must not count.
func work(d time.Duration) {
	end := time.Now().Add(d)
	if d >= 200*time.Microsecond {
		sleepFor(d - 50*time.Microsecond)
	}
	for time.Now().Before(end) {
	}
}
