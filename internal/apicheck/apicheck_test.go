package apicheck

import (
	"os"
	"path/filepath"
	"testing"
)

// The recipes' handles keep the engine they are built on out of their
// public API: no exported name, signature or doc mentions it.
func TestRecipesKeepTheEngineOut(t *testing.T) {
	for _, dir := range []string{"../../machines/lock", "../../machines/election", "../../machines/rwlock"} {
		found, err := Mentions(dir, "contention")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			t.Errorf("%s: the public API mentions the contention package: %s", filepath.Base(dir), f)
		}
	}
}

// The check finds what it looks for.
func TestMentionsFindsAnExportedMention(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nimport \"example.com/contention\"\n\n// Leak is a leak.\nfunc Leak() contention.Options { return contention.Options{} }\n\nfunc hidden() contention.Options { return contention.Options{} }\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found, err := Mentions(dir, "contention")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("want the one exported mention, got %q", found)
	}
}
