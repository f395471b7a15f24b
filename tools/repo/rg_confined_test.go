package repo

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"troupe/sandbox"
	"troupe/tools"
	"troupe/workspace"
)

// TestConfinedRgReadsNothingOutside names the way out to rg directly: rg
// follows a symlink it is given as a path, and the unconfined rg prints
// what lies behind it. The confined one must print nothing from outside,
// whatever it is given.
func TestConfinedRgReadsNothingOutside(t *testing.T) {
	bin, err := exec.LookPath("rg")
	if err != nil {
		t.Skip("rg is not installed")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret.txt"), "needle SECRET\n")
	write(filepath.Join(dir, "inside.txt"), "needle inside\n")
	for name, target := range map[string]string{"link": outside, "file-link": filepath.Join(outside, "secret.txt"), "root-link": "/"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	var logs bytes.Buffer
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &rgSearch{ws: ws, bin: bin, sb: sb, log: slog.New(slog.NewTextHandler(&logs, nil)), fallback: &builtinSearch{ws: ws}}
	if err := sb.Check(s.policy()); err != nil {
		if abi, _ := llsys.LandlockGetABIVersion(); abi > 0 {
			t.Fatalf("the kernel has Landlock ABI %d, yet the read-only policy is refused: %v", abi, err)
		}
		t.Skipf("cannot confine rg here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, paths := range [][]string{
		{"link"}, {"link/secret.txt"}, {"link/"}, {"file-link"}, {outside}, {filepath.Join(outside, "secret.txt")},
		{"root-link/" + strings.TrimPrefix(outside, "/")}, {".", "link"},
	} {
		// The unconfined rg reads it: the check below can fail.
		args := append([]string{"--no-config", "needle", "--"}, paths...)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir, cmd.Env = dir, []string{}
		if out, _ := cmd.Output(); !bytes.Contains(out, []byte("SECRET")) {
			t.Fatalf("unconfined rg %v does not read outside (%q), so this test proves nothing", paths, out)
		}

		q, err := newQuery("needle", nil)
		if err != nil {
			t.Fatal(err)
		}
		q.rgPaths = paths
		c := &collector{max: 100}
		if err := s.run(ctx, &tools.Request{}, q, c); err != nil {
			t.Errorf("%v: %v", paths, err)
		}
		for _, m := range c.matches {
			if strings.Contains(m.LineText, "SECRET") {
				t.Errorf("%v: confined rg returned %+v from outside the workspace", paths, m)
			}
		}
		if paths[0] == "." && (len(c.matches) != 1 || c.matches[0].FilePath != "inside.txt") {
			t.Errorf("%v: want the one inside match, got %+v", paths, c.matches)
		}
	}
	if s.disabled.Load() {
		t.Fatalf("rg was not run confined, the built-in search answered: %s", logs.String())
	}
}

// TestRgFallsBackWhenItCannotBeConfined: where the read-only policy cannot
// be enforced, repo.ripgrep answers with the built-in search (the same
// results) and says so in the log once, not once per call.
func TestRgFallsBackWhenItCannotBeConfined(t *testing.T) {
	bin, err := exec.LookPath("rg")
	if err != nil {
		t.Skip("rg is not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	// A helper that does not run makes every confined policy unenforceable.
	sb, err := sandbox.New(sandbox.Options{Helper: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := &rgSearch{ws: ws, bin: bin, sb: sb, log: slog.New(slog.NewTextHandler(&logs, nil)), fallback: &builtinSearch{ws: ws}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 3 {
		q, err := newQuery("needle", nil)
		if err != nil {
			t.Fatal(err)
		}
		c := &collector{max: 10}
		if err := s.run(ctx, &tools.Request{}, q, c); err != nil || len(c.matches) != 1 || c.matches[0].FilePath != "a.txt" {
			t.Fatalf("fallback search: %v, %+v", err, c.matches)
		}
	}
	if n := strings.Count(logs.String(), "using the built-in search"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if !s.disabled.Load() {
		t.Error("rg is still in use")
	}
}
