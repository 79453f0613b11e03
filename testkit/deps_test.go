package testkit

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestProgramsLinkNoTesting: the programs, and the testkit packages they
// may import, link neither the testing package nor goleak. testkit itself,
// which does, is the control that the check sees them.
func TestProgramsLinkNoTesting(t *testing.T) {
	const module = "github.com/zkrecipes/zkrecipes/"
	deps := func(pkgs ...string) []string {
		t.Helper()
		args := []string{"list", "-deps"}
		for _, p := range pkgs {
			args = append(args, module+p)
		}
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	forbidden := func(list []string) []string {
		return slices.DeleteFunc(list, func(p string) bool {
			return p != "testing" && !strings.HasPrefix(p, "go.uber.org/goleak")
		})
	}
	if bad := forbidden(deps("cmd/demo", "cmd/zkbench", "cmd/zkr", "testkit/sim", "testkit/proxy", "testkit/fault", "testkit/zkserver")); len(bad) > 0 {
		t.Fatalf("the programs or testkit's program packages link %v", bad)
	}
	if got := forbidden(deps("testkit")); !slices.Contains(got, "testing") || !slices.Contains(got, "go.uber.org/goleak") {
		t.Fatalf("testkit's own dependencies show %v: the check does not see testing and goleak", got)
	}
}
