package apicheck

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// internals are the names no recipe package exports: its machine and what
// drives it are its own.
var internals = []string{"Machine", "NewMachine", "Config", "Input", "Command"}

// machines are the packages under machines/.
func machines(t *testing.T) []string {
	dirs, err := filepath.Glob("../../machines/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no packages under machines/: %v", err)
	}
	return slices.DeleteFunc(dirs, func(d string) bool {
		fi, err := os.Stat(d)
		return err != nil || !fi.IsDir()
	})
}

// The recipes keep the engine they are built on out of their public API:
// no exported name, signature or doc mentions it.
func TestRecipesKeepTheEngineOut(t *testing.T) {
	for _, dir := range machines(t) {
		if filepath.Base(dir) == "contention" {
			continue
		}
		found, err := Mentions(dir, "contention")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			t.Errorf("%s: the public API mentions the contention package: %s", filepath.Base(dir), f)
		}
	}
}

// No package under machines/ exports its machine, config, inputs or
// commands. The contention engine is the one package whose Config and
// Input are its API: the recipes built on it configure and call it with
// them (and TestRecipesKeepTheEngineOut keeps them out of the recipes'
// own API); its machine and commands are its own.
func TestMachinesKeepTheirInternals(t *testing.T) {
	for _, dir := range machines(t) {
		names := internals
		if filepath.Base(dir) == "contention" {
			names = []string{"Machine", "NewMachine", "Command"}
		}
		found, err := Exports(dir, names...)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) > 0 {
			t.Errorf("%s exports %v", filepath.Base(dir), found)
		}
	}
}

// The checks find what they look for.
func TestChecksFindWhatIsPlanted(t *testing.T) {
	if found, err := Exports("testdata/planted", internals...); err != nil || !slices.Equal(found, []string{"Machine"}) {
		t.Errorf("Exports(planted) = %v, %v; want [Machine]", found, err)
	}
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
