package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSystemdUnit checks deploy/troupe.service with systemd-analyze verify
// in a root that holds what the unit names (the release binaries, kill,
// systemd's own units): any warning fails, since verify exits 0 on unknown
// keys and unparsable values. systemd does not run on this machine, so the
// unit is not started; instead troupe runs as its hardening leaves it (a
// non-root user, no_new_privs, an empty capability bounding set) through
// setpriv, and a sandboxed command tool must still run with user and mount
// namespaces. Before: no unit.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package has it)")
	}
	dist := releaseBuild(t)
	unit, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", "troupe.service"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	kill, err := exec.LookPath("kill")
	if err != nil {
		t.Fatalf("no kill for the unit's ExecReload: %v", err)
	}
	for _, f := range []struct {
		from, to string
		mode     os.FileMode
	}{
		{filepath.Join(dist, "troupe"), "usr/local/bin/troupe", 0o755},
		{filepath.Join(dist, "troupe-sandbox"), "usr/local/bin/troupe-sandbox", 0o755},
		{kill, "usr/bin/kill", 0o755},
	} {
		installFile(t, f.from, filepath.Join(root, f.to), f.mode)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	// The targets the unit orders itself after and is wanted by.
	units, err := filepath.Glob("/lib/systemd/system/*")
	if err != nil || len(units) == 0 {
		t.Skipf("no systemd units in /lib/systemd/system to verify against (%v)", err)
	}
	for _, u := range units {
		if fi, err := os.Lstat(u); err == nil && fi.Mode().IsRegular() {
			installFile(t, u, filepath.Join(root, "usr/lib/systemd/system", filepath.Base(u)), 0o644)
		}
	}
	writeFileMode(t, filepath.Join(root, "etc/systemd/system/troupe.service"), unit, 0o644)
	out, err := exec.Command(analyze, "verify", "--root="+root, "troupe.service").CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The unit's command line, as systemd would run it, must be one troupe
	// accepts: its flags are checked before anything is served.
	var execStart string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = v
		}
	}
	if !strings.HasPrefix(execStart, "/usr/local/bin/troupe serve ") {
		t.Fatalf("ExecStart %q does not run troupe serve", execStart)
	}

	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux) to run troupe as the unit's hardening leaves it")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: setpriv cannot change to the service's user")
	}
	// Everything the service's user reaches: world-readable binaries, its
	// own workspace, state and temp directories.
	base, err := os.MkdirTemp("", "troupe-service-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "bin")
	installFile(t, filepath.Join(dist, "troupe"), filepath.Join(bin, "troupe"), 0o755)
	installFile(t, filepath.Join(dist, "troupe-sandbox"), filepath.Join(bin, "troupe-sandbox"), 0o755)
	const uid = "65534" // nobody: a user with no rights of its own, as the unit's troupe
	workspace, state, tmp := filepath.Join(base, "workspace"), filepath.Join(base, "state"), filepath.Join(base, "tmp")
	writeFileMode(t, filepath.Join(workspace, "hello.txt"), []byte("hello from the host\n"), 0o644)
	writeFileMode(t, filepath.Join(base, "config.toml"), []byte(strings.Replace(stampConfig, "/usr/local/bin/troupe", filepath.Join(bin, "troupe"), 1)), 0o644)
	for _, d := range []string{state, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{workspace, filepath.Join(workspace, "hello.txt"), state, tmp} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid="+uid, "--regid="+uid, "--clear-groups",
		"--no-new-privs", "--bounding-set=-all", "--inh-caps=-all",
		filepath.Join(bin, "troupe"), "serve", "--workspace", workspace, "--config", filepath.Join(base, "config.toml"))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + state, "XDG_STATE_HOME=" + state, "TMPDIR=" + tmp}
	answers, logs := stdioExchange(t, cmd)
	if text := fmt.Sprint(answers[3]["result"]); !strings.Contains(text, "hello from the host") {
		t.Errorf("repo.readFile: %v", answers[3])
	}
	checkStamp(t, answers, logs)
}

// installFile copies from to to (making its directory) with mode.
func installFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFileMode(t, to, data, mode)
}

// writeFileMode writes data to path with mode, making its directory.
func writeFileMode(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
