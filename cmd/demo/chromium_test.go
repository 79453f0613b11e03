package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var saveScreenshot = flag.Bool("screenshot", false, "TestTimelineInChromium: save its screenshot as docs/timeline.png")

// chromium is the headless browser's path. Missing, the test fails when
// the environment sets ZK_REQUIRED=1 (as CI does: scripts/test.sh installs
// Debian's chromium) or CI; otherwise it says so and returns "".
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (Debian: apt-get install chromium; scripts/test.sh installs it as root)"
	if os.Getenv("ZK_REQUIRED") == "1" || os.Getenv("CI") != "" {
		t.Fatal(msg + "; ZK_REQUIRED=1 or CI, so this is a failure")
	}
	t.Log(msg + ": the page is checked, not rendered (ZK_REQUIRED=1 makes this a failure)")
	return ""
}

// The demo's timeline page renders in headless Chromium with no script
// error, one lane per actor of the demo, and a screenshot.
func TestTimelineInChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	page := filepath.Join(dir, "timeline.html")
	var out, stderr bytes.Buffer
	if code := run(ctx, []string{"-scenario", "election", "-waterfall=false", "-html", page}, &out, &stderr); code != 0 {
		t.Fatalf("demo: exit %d: %s\n%s", code, stderr.String(), out.String())
	}
	actors := actorsOf(out.String())
	if len(actors) != 5 {
		t.Fatalf("actors %v, want node-1 to node-5", actors)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if got := actorLanes(string(b)); !slices.Equal(got, actors) {
		t.Errorf("the page's lanes %v, want %v", got, actors)
	}
	browser := chromium(t)
	if browser == "" {
		return
	}
	url := "file://" + page
	headless := func(args ...string) (stdout, stderr string) {
		t.Helper()
		args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
			"--user-data-dir=" + filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0"}, args...)
		cmd := exec.CommandContext(ctx, browser, append(args, url)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		cmd.Env = append(os.Environ(), "HOME="+dir) // root in CI: a home of its own
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", browser, args, err, e.String())
		}
		return o.String(), e.String()
	}

	dom, logs := headless("--dump-dom")
	root := regexp.MustCompile(`<html[^>]*>`).FindString(dom)
	for _, want := range []string{`data-rendered="yes"`, `data-errors="0"`, `data-lanes="` + strconv.Itoa(len(actorLanesAll(dom))) + `"`} {
		if !strings.Contains(root, want) {
			t.Errorf("rendered page's root %q lacks %s (errors: %s)", root, want, regexp.MustCompile(`id="status">[^<]*`).FindString(dom))
		}
	}
	if got := actorLanes(dom); !slices.Equal(got, actors) {
		t.Errorf("rendered lanes %v, want %v", got, actors)
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "CONSOLE") || strings.Contains(l, "Uncaught") {
			t.Errorf("console: %s", l)
		}
	}

	shot := filepath.Join(dir, "timeline.png")
	headless("--window-size=1400,560", "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10_000 {
		t.Fatalf("screenshot: %d bytes, not a PNG of a page", len(png))
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	if *saveScreenshot {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "timeline.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// actorLanesAll are all the lanes of a page, those of spans of no
// instance too.
func actorLanesAll(page string) []string {
	return regexp.MustCompile(`data-lane="[^"]*"`).FindAllString(page, -1)
}
