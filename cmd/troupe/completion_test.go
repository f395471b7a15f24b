package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// completionScript is the output of "troupe completion SHELL".
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	dir := t.TempDir()
	stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
	if code := run([]string{"completion", shell}, strings.NewReader(""), stdout, stderr); code != 0 {
		errText, _ := os.ReadFile(stderr.Name())
		t.Fatalf("troupe completion %s: exit %d: %s", shell, code, errText)
	}
	out, err := os.ReadFile(stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "troupe."+shell)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// bashComplete sources script in bash, completes line as if TAB were
// pressed at its end (in dir), and returns the candidates, sorted.
func bashComplete(t *testing.T, script, dir, line string) []string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	prog := "source " + script + "\n" +
		"complete -p troupe >/dev/null || exit 3\n" +
		"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
		"COMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n" +
		"_troupe\n" +
		`printf '%s\n' "${COMPREPLY[@]}"` + "\n"
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", prog)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash completing %q: %v\n%s", line, err, out)
	}
	got := strings.Fields(string(out))
	slices.Sort(got)
	return got
}

// TestCompletionBash: "troupe completion bash", sourced in bash, completes
// commands, subcommands, flags and their paths. Before: no such command.
func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := completionScript(t, "bash")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "workfile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line string
		want []string
	}{
		{"troupe se", []string{"serve"}},
		{"troupe co", []string{"codex-config", "completion", "config"}},
		{"troupe config ch", []string{"check"}},
		{"troupe audit ", []string{"verify"}},
		{"troupe serve --work", []string{"--workspace"}},
		{"troupe serve --workspace wo", []string{"work"}},          // a directory, not the file
		{"troupe serve --config wo", []string{"work", "workfile"}}, // a file (or the directory it is in)
		{"troupe serve --log-level ", nil},                         // a value: nothing to offer
		{"troupe serve --log-level debug --std", []string{"--stdio"}},
		{"troupe tools --json --con", []string{"--config"}}, // --json takes no value
		{"troupe config check --work", []string{"--workspace"}},
		{"troupe audit verify --work", nil}, // audit verify has no --workspace
		{"troupe bench s", []string{"sessions", "soak"}},
		{"troupe bench soak --ra", []string{"--rate"}},
		{"troupe bench -- se", nil}, // another program's command line
		{"troupe help au", []string{"audit"}},
		{"troupe completion ", []string{"bash", "fish", "zsh"}},
		{"troupe serve ex", nil}, // serve takes no argument
	} {
		if got := bashComplete(t, script, dir, c.line); !slices.Equal(got, c.want) {
			t.Errorf("%q completes to %q, want %q", c.line, got, c.want)
		}
	}
}

// TestCompletionOffersWhatHelpLists: for every command, the flags bash
// offers after "-" are exactly those its --help lists, so completion and
// help come from one table and cannot drift.
func TestCompletionOffersWhatHelpLists(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := completionScript(t, "bash")
	dir := t.TempDir()
	flagLine := regexp.MustCompile(`(?m)^  (--?[a-z][a-z0-9-]*)`)
	for _, c := range commandTable() {
		if c.help.name == "help" {
			continue // "troupe help --help" is the overview
		}
		stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
		args := append(strings.Fields(c.help.name), "--help")
		if code := run(args, strings.NewReader(""), stdout, stderr); code != 0 {
			t.Fatalf("troupe %s: exit %d", strings.Join(args, " "), code)
		}
		help, _ := os.ReadFile(stdout.Name())
		var listed []string
		for _, m := range flagLine.FindAllStringSubmatch(string(help), -1) {
			listed = append(listed, m[1])
		}
		slices.Sort(listed)
		got := bashComplete(t, script, dir, "troupe "+c.help.name+" -")
		if !slices.Equal(got, listed) {
			t.Errorf("troupe %s: completion offers %q, --help lists %q", c.help.name, got, listed)
		}
	}
	// And the overview names every command of the table.
	stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
	run([]string{"help"}, strings.NewReader(""), stdout, stderr)
	overview, _ := os.ReadFile(stdout.Name())
	for _, c := range commandTable() {
		if !strings.Contains(string(overview), "troupe "+c.help.name) {
			t.Errorf("troupe help does not name %q", c.help.name)
		}
	}
}

// TestCompletionZshFish: the zsh and fish scripts parse, zsh's registers
// with compinit, and fish's completes "troupe se" to serve (fish can
// complete a line non-interactively; zsh cannot without a terminal).
func TestCompletionZshFish(t *testing.T) {
	t.Run("zsh", func(t *testing.T) {
		if _, err := exec.LookPath("zsh"); err != nil {
			t.Skip("zsh is not installed")
		}
		script := completionScript(t, "zsh")
		if out, err := exec.Command("zsh", "-n", script).CombinedOutput(); err != nil {
			t.Fatalf("zsh -n: %v\n%s", err, out)
		}
		prog := "autoload -U compinit && compinit -u -d " + filepath.Join(t.TempDir(), "zcompdump") +
			" && source " + script + ` && print -r -- "$_comps[troupe]"`
		out, err := exec.Command("zsh", "-f", "-c", prog).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "_troupe" {
			t.Fatalf("zsh: %v\n%s", err, out)
		}
	})
	t.Run("fish", func(t *testing.T) {
		if _, err := exec.LookPath("fish"); err != nil {
			t.Skip("fish is not installed")
		}
		script := completionScript(t, "fish")
		if out, err := exec.Command("fish", "--no-execute", script).CombinedOutput(); err != nil {
			t.Fatalf("fish --no-execute: %v\n%s", err, out)
		}
		for _, c := range []struct{ line, want string }{
			{"troupe se", "serve\t"},
			{"troupe config ch", "check\t"},
			{"troupe serve --work", "--workspace\t"},
			{"troupe bench so", "soak"},
		} {
			cmd := exec.Command("fish", "--no-config", "-c", "source "+script+"; complete -C '"+c.line+"'")
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), c.want) {
				t.Errorf("fish completes %q to %q (%v), want %q first", c.line, out, err, c.want)
			}
		}
	})
}
