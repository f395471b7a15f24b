package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesOwnFilesWhereRunsWrite runs the real troupe binary with
// its config file, audit log or spool directory where a tool run may write
// (or with a spool directory that cannot hold outputs) and expects it to
// refuse to start, naming the path and the fix. Before the check, troupe
// served with such a config: one approved run could rewrite it, and the
// reload put an unsandboxed, unapproved tool in force.
func TestServeRefusesOwnFilesWhereRunsWrite(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "troupe")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// A workspace reached through a symlink must not dodge the check.
	real := t.TempDir()
	ws := filepath.Join(t.TempDir(), "ws-link")
	if err := os.Symlink(real, ws); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	write := func(path string) string {
		t.Helper()
		if err := os.WriteFile(path, []byte("[server]\nname = \"own-files\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	inWorkspace := write(filepath.Join(real, "troupe.toml"))
	linked := filepath.Join(outside, "linked.toml")
	if err := os.Symlink(inWorkspace, linked); err != nil {
		t.Fatal(err)
	}
	good := write(filepath.Join(outside, "good.toml"))
	notDir := write(filepath.Join(outside, "not-a-dir"))

	cases := []struct {
		name    string
		args    []string
		mention []string
	}{
		{"config in workspace", []string{"--config", inWorkspace},
			[]string{inWorkspace, "move the config file outside the workspace"}},
		{"config symlinked into workspace", []string{"--config", linked},
			[]string{linked, inWorkspace, "move the config file outside the workspace"}},
		{"audit log in workspace", []string{"--config", good, "-c", fmt.Sprintf("audit.path=%q", filepath.Join(ws, "logs", "audit.jsonl"))},
			[]string{"audit.path", filepath.Join(real, "logs", "audit.jsonl"), "set audit.path outside the workspace"}},
		{"spool in workspace", []string{"--config", good, "-c", fmt.Sprintf("output.spool_dir=%q", real)},
			[]string{"output.spool_dir", real, "outside the workspace"}},
		{"spool missing", []string{"--config", good, "-c", fmt.Sprintf("output.spool_dir=%q", filepath.Join(outside, "missing"))},
			[]string{"output.spool_dir", filepath.Join(outside, "missing"), "does not exist"}},
		{"spool not a directory", []string{"--config", good, "-c", fmt.Sprintf("output.spool_dir=%q", notDir)},
			[]string{"output.spool_dir", notDir, "not a directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"serve", "--workspace", ws}, c.args...)...)
			cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
			// stdin is /dev/null: a troupe that does serve ends at once.
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("troupe served (%v), want exit 2; stderr:\n%s", err, stderr.String())
			}
			// The message is one log line: its quoting doubles backslashes
			// only, which these paths do not have.
			for _, want := range c.mention {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not mention %q:\n%s", want, stderr.String())
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout must stay empty, got %q", stdout.String())
			}
		})
	}

	// config check refuses the same configuration, with the same words.
	t.Run("config check", func(t *testing.T) {
		cmd := exec.Command(bin, "config", "check", "--workspace", ws, "--config", inWorkspace)
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "move the config file outside the workspace") {
			t.Fatalf("config check: %v\n%s", err, out)
		}
	})
}
