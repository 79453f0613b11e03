// Package golden compares a test's output with a golden file in the
// package's testdata directory; `go test -update` rewrites the files.
// It is internal: the -update flag it registers would collide with a
// user's own.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata")

// Check compares got with testdata/<name>.txt and fails t when they
// differ, or rewrites the file with -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name+".txt")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("transcript %s differs from %s (run with -update after checking):\n%s", name, file, got)
	}
}
