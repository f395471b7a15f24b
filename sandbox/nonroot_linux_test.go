package sandbox

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the uid and gid the non-root tests run as.
const nobody = 65534

// TestAsNonRoot runs the escape tests again in a copy of this test binary
// running as nobody, which is how most people run troupe: network off
// then means a user namespace plus a network namespace, and max_processes
// means RLIMIT_NPROC counted in that user namespace instead of a cgroup.
func TestAsNonRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("already not root: the other tests cover this")
	}
	if testing.Short() {
		t.Skip("slow: runs the escape tests again")
	}
	// nobody must be able to reach the binary: a 0755 directory of its own.
	dir, err := os.MkdirTemp("", "troupe-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := copyFile(testBinary(t), bin); err != nil {
		t.Fatal(err)
	}
	tests := []string{
		"TestIsolationMatchesKernel", "TestFilesystemEscapes", "TestNetworkEscapes", "TestSyscallEscapes",
		"TestServerEnvironIsProtected", "TestForkBombIsLimited", "TestKillTakesTheWholeTree",
		"TestReleaseRemovesEverything", "TestStartErrors", "TestCallerFilesAndEnv",
		"TestBwrapFilesystemEscapes", "TestBwrapNetworkEscapes", "TestBwrapKillTakesTheWholeTree",
		"TestReadOnlyWorkspace", "TestBwrapReadOnlyWorkspace",
		"TestNestedUserNamespacesRefused", "TestNestedUserNamespaces", "TestCodexSandboxInside", "TestWritableAndHidden",
	}
	cmd := exec.Command(bin, "-test.run=^("+strings.Join(tests, "|")+")$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp", "HOME=/nonexistent", "GORACE=atexit_sleep_ms=0", codexEnv + "=" + codexCLI(t)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, text)
	}
	// A test that skips as nobody would hide a missing path: list them.
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, "--- SKIP") || strings.Contains(line, "isolation:") || strings.Contains(line, "children started") {
			t.Log(strings.TrimSpace(line))
		}
	}
	if !strings.Contains(text, "--- PASS: TestForkBombIsLimited/default") {
		t.Errorf("the fork bomb was not limited as nobody:\n%s", text)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
