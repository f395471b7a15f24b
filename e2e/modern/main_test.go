package modern

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

var (
	// moduleRoot is the absolute path of the troupe module, two levels up.
	moduleRoot string
	// binDir holds the troupe binary and the servers' state directory;
	// TestMain makes and removes it.
	binDir string
	// stateHome is the servers' $XDG_STATE_HOME (their audit logs), so
	// nothing lands in the home directory of whoever runs the tests.
	stateHome string

	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain is TestMain's body, apart so its deferred cleanup runs before
// os.Exit.
func runMain(m *testing.M) int {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err == nil {
		var mod []byte
		mod, err = os.ReadFile(filepath.Join(root, "go.mod"))
		if err == nil && !bytes.HasPrefix(mod, []byte("module troupe\n")) {
			err = fmt.Errorf("%s/go.mod is not troupe's", root)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/modern: cannot find troupe's module: %v\n", err)
		return 1
	}
	moduleRoot = root
	binDir, err = os.MkdirTemp("", "troupe-e2e-modern-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/modern: %v\n", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	stateHome = filepath.Join(binDir, "state")
	return m.Run()
}

// troupeBinary returns the path of the troupe binary: $TROUPE_E2E_BINARY
// when set, else one built from the parent module on first use (with -race
// when these tests run under it, so the server's interleavings are checked
// too).
func troupeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("TROUPE_E2E_BINARY"); bin != "" {
		return bin
	}
	bin := filepath.Join(binDir, "troupe")
	buildOnce.Do(func() {
		args := []string{"build", "-o", bin}
		if raceEnabled() {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/troupe")...)
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building troupe: %v", buildErr)
	}
	return bin
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// serverEnv is the environment troupe runs with: ours, with the state
// directory of the tests and without a token variable from outside.
func serverEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "XDG_STATE_HOME=") && !strings.HasPrefix(kv, tokenEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "XDG_STATE_HOME="+stateHome), extra...)
}

// fixture is a workspace for one test.
type fixture struct {
	dir    string // the workspace
	readme string // README.md's content
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	fx := fixture{dir: t.TempDir(), readme: "# demo\n\nA workspace for troupe's 2026-07-28 tests.\n"}
	for name, content := range map[string]string{
		".git/HEAD":   "ref: refs/heads/main\n",
		"README.md":   fx.readme,
		"src/main.go": "package main\n\nfunc main() {}\n",
	} {
		p := filepath.Join(fx.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return fx
}

// exists reports whether name (relative to dir) exists.
func exists(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, name))
	return err == nil
}
