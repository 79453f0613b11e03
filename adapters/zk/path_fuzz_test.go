package zk

import (
	"errors"
	"strings"
	"testing"
)

// FuzzValidatePath: ValidatePath never panics, refuses with ErrInvalidPath
// only, and what it accepts is a path Parent, Base and Join take apart and
// put back together.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"/", "/a", "/a/b", "", "a", "/a/", "//", "/a//b", "/.", "/a/..", "/a\x00b", "/\u0085", "/\ud7ff", "/\uffef", "/zk/_c_0f0f-lock-0000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := ValidatePath(p)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("ValidatePath(%q) = %v: not ErrInvalidPath", p, err)
			}
			return
		}
		if p[0] != '/' || (p != "/" && strings.HasSuffix(p, "/")) || strings.Contains(p, "//") {
			t.Fatalf("ValidatePath accepted %q", p)
		}
		for _, seg := range strings.Split(p[1:], "/") {
			if p != "/" && (seg == "." || seg == "..") {
				t.Fatalf("ValidatePath accepted %q (segment %q)", p, seg)
			}
		}
		if p != "/" {
			if got := Join(Parent(p), Base(p)); got != p {
				t.Fatalf("Join(Parent, Base) of %q = %q", p, got)
			}
			if err := ValidatePath(Parent(p)); err != nil {
				t.Fatalf("the parent of valid %q is not: %v", p, err)
			}
		}
	})
}
