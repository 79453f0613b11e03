package zk

import (
	"fmt"
	"strings"
)

// ValidatePath reports, as an error wrapping ErrInvalidPath, why path is not
// an absolute ZooKeeper node path: empty, relative, a trailing slash, an
// empty, "." or ".." segment, or a NUL, control or non-character rune.
// "/" itself is valid.
func ValidatePath(path string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, path, why) }
	switch {
	case path == "":
		return bad("empty")
	case path[0] != '/':
		return bad("not absolute")
	case path == "/":
		return nil
	case strings.HasSuffix(path, "/"):
		return bad("trailing slash")
	}
	for _, seg := range strings.Split(path[1:], "/") {
		switch seg {
		case "":
			return bad("empty segment")
		case ".", "..":
			return bad("relative segment")
		}
	}
	for _, r := range path {
		if r == 0 || (r > 0 && r < 0x20) || (r >= 0x7f && r <= 0x9f) ||
			(r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
			return bad(fmt.Sprintf("character %U not allowed", r))
		}
	}
	return nil
}

// Join joins a parent path and a child name.
func Join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// Parent returns the parent of an absolute path ("/" for top-level nodes).
func Parent(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// Base returns the last segment of an absolute path.
func Base(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }
