package testkit

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests and is meant to be its TestMain:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
// After the tests it stops the ZooKeeper server ForEachTarget shared
// between them (printing its log tail when a test failed), then fails the
// run if any goroutine is left over (go.uber.org/goleak), and exits.
func Main(m *testing.M) {
	code := m.Run()
	stopSharedServer(code != 0)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "testkit: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
