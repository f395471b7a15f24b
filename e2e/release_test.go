package e2e

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// releaseVersion is the version the tests stamp with scripts/release: a
// form no tag of this repository has, so the script takes it as given.
const releaseVersion = "v0.0.0-e2e.1"

var (
	releaseOnce sync.Once
	releaseDir  string
	releaseErr  error
)

// releaseBuild runs scripts/release once per test binary into a temporary
// dist directory and returns it: the binaries and image files an operator
// gets, built as the script builds them.
func releaseBuild(t *testing.T) string {
	t.Helper()
	releaseOnce.Do(func() {
		releaseDir = filepath.Join(binDir, "dist")
		cmd := exec.Command("bash", "scripts/release", releaseVersion)
		cmd.Dir = moduleRoot
		cmd.Env = append(os.Environ(), "DIST="+releaseDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			releaseErr = fmt.Errorf("scripts/release: %v\n%s", err, out)
		}
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseDir
}

// TestReleaseBuild: scripts/release stamps the given version and the
// commit into troupe ("troupe version" says both, and the Go version), and
// builds troupe and troupe-sandbox statically. Before: no release build,
// and every install said "troupe (devel)".
func TestReleaseBuild(t *testing.T) {
	head, err := exec.Command("git", "-C", moduleRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout (scripts/release needs one): %v", err)
	}
	dist := releaseBuild(t)
	out, err := exec.Command(filepath.Join(dist, "troupe"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("troupe version: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`^troupe ` + regexp.QuoteMeta(releaseVersion) + ` \(revision ([0-9a-f]{40})(, [^,]+)*, go1\.[0-9.]+\)\n$`)
	m := re.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("troupe version said %q; want %s", out, re)
	}
	if m[1] != strings.TrimSpace(string(head)) {
		t.Errorf("revision %s, HEAD is %s", m[1], head)
	}
	for _, name := range []string{"troupe", "troupe-sandbox", "troupe-cluster"} {
		f, err := elf.Open(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked (it has an interpreter): CGO_ENABLED=0 was not applied", name)
			}
		}
		f.Close()
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil || !strings.Contains(string(sums), " troupe\n") || !strings.Contains(string(sums), " troupe-sandbox\n") ||
		!strings.Contains(string(sums), " troupe-cluster\n") {
		t.Errorf("SHA256SUMS: %q, %v", sums, err)
	}
	// A version that is not one is refused before anything is built.
	cmd := exec.Command("bash", "scripts/release", "1.2")
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "DIST="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "vMAJOR.MINOR.PATCH") {
		t.Errorf("scripts/release 1.2: %v, %s", err, out)
	}
}
