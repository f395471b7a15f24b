package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"troupe/internal/ptytest"
)

// The attacks of issue 13, each as it was made against troupe: every one
// of them succeeded before the fixes they test. TestAsNonRoot runs them
// again as an unprivileged user.

// drivers lists the drivers this machine can test: builtin always, bwrap
// when it is installed and works.
func drivers(t *testing.T) []string {
	out := []string{DriverBuiltin}
	if path, err := exec.LookPath("bwrap"); err == nil && path != "" {
		if s := newSandbox(t, DriverBwrap); s.iso.Bwrap != "" {
			out = append(out, DriverBwrap)
		}
	}
	return out
}

// ctty is how TestNoTerminalInjection finds its terminal in the copy of
// the test binary that runs with one.
const cttyEnv = "TROUPE_TEST_CTTY"

// TestNoTerminalInjection gives the tests a pseudo-terminal as their
// controlling terminal (a copy of this test binary runs in a new session
// with the terminal's slave as stdin) and has sandboxed runs push a
// command into it with TIOCSTI, as the attack typed one into the user's
// shell. Nothing may arrive: runs start in a session of their own, without
// a controlling terminal, and the filter refuses TIOCSTI anyway.
func TestNoTerminalInjection(t *testing.T) {
	if os.Getenv(cttyEnv) != "" {
		injectIntoOwnTerminal(t)
		return
	}
	master, slave := ptytest.Open(t)
	slavePath := slave.Name()
	// Drain what the terminal echoes, so the child never blocks on it.
	go func() { _, _ = bufio.NewReader(master).WriteTo(&bytes.Buffer{}) }()
	cmd := exec.Command(testBinary(t), "-test.run=^TestNoTerminalInjection$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), cttyEnv+"="+slavePath)
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil || !strings.Contains(out.String(), "--- PASS: TestNoTerminalInjection") {
		t.Fatalf("with a controlling terminal: %v\n%s", err, out.String())
	}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if strings.Contains(line, "refused as wanted") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// injectIntoOwnTerminal runs in the copy with a controlling terminal.
func injectIntoOwnTerminal(t *testing.T) {
	tty := os.Getenv(cttyEnv)
	if fd, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err != nil || fd <= 0 {
		t.Fatalf("stdin is not our controlling terminal: %v", err)
	}
	ws, _ := workspace(t)
	const typed = "echo INJECTED\n"
	for _, driver := range drivers(t) {
		s := newSandbox(t, driver)
		for _, prof := range profiles {
			for _, target := range []string{"/dev/tty", tty} {
				if prof == ProfileNone && target == tty && os.Getuid() == 0 {
					// An unconfined root program may open any terminal
					// and has CAP_SYS_ADMIN: "none" is for trusted
					// programs. Without a controlling terminal it still
					// cannot reach ours through /dev/tty.
					continue
				}
				r := runIn(t, s, policy(prof, ws), testBinary(t), probeArg, "tiocsti", target, typed)
				if !strings.Contains(r.stdout, "denied") {
					t.Errorf("%s/%s: TIOCSTI on %s: %v", driver, prof, target, r)
					continue
				}
				t.Logf("refused as wanted: %s/%s %s: %s", driver, prof, target, strings.TrimSpace(r.stdout))
			}
		}
	}
	// Whatever was pushed into the terminal is now our input.
	if err := syscall.SetNonblock(0, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	buf := make([]byte, 4096)
	if n, _ := syscall.Read(0, buf); n > 0 {
		t.Fatalf("a run typed into troupe's terminal: %q", buf[:n])
	}
}

// TestMetadataOutsideTheWorkspace changes a file's mode (the setuid bit of
// a binary, as the attack made a setuid root shell), times and extended
// attributes outside the workspace, and /dev/null's mode: none may change.
// Inside the workspace they still work (chmod +x build.sh).
func TestMetadataOutsideTheWorkspace(t *testing.T) {
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) { testMetadata(t, driver) })
	}
}

func testMetadata(t *testing.T, driver string) {
	s := newSandbox(t, driver)
	ws, outside := workspace(t)
	target := filepath.Join(outside, "tool")
	if err := os.WriteFile(target, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(target, past, past); err != nil {
		t.Fatal(err)
	}
	before := statOf(t, target)
	script := fmt.Sprintf(`F=%q
chmod 4755 "$F" && echo CHANGED-mode
touch "$F" && echo CHANGED-time
chown "$(id -u):$(id -g)" "$F" && echo CHANGED-owner
chmod 0666 /dev/null && echo CHANGED-devnull
echo '#!/bin/sh' > %q/build.sh && chmod +x %q/build.sh && echo inside-ok
`, target, ws, ws)
	r := runIn(t, s, policy(ProfileDefault, ws), sh(script)...)
	x := runIn(t, s, policy(ProfileDefault, ws), testBinary(t), probeArg, "setxattr", target)
	if strings.Contains(r.stdout, "CHANGED") || !strings.Contains(x.stdout, "denied") {
		t.Errorf("metadata outside the workspace changed: %v; xattr: %v", r, x)
	}
	if after := statOf(t, target); after != before {
		t.Errorf("outside file changed: %s, was %s", after, before)
	}
	if v, err := unix.Getxattr(target, "user.troupe", make([]byte, 64)); err == nil {
		t.Errorf("xattr set outside (%d bytes)", v)
	}
	if !strings.Contains(r.stdout, "inside-ok") {
		t.Errorf("chmod +x inside the workspace failed: %v", r)
	}
	if fi, err := os.Stat(filepath.Join(ws, "build.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("build.sh is not executable: %v %v", fi, err)
	}
	// The same under none: the attack works there, which proves the test
	// can see it.
	if os.Getuid() == 0 {
		n := runIn(t, s, policy(ProfileNone, ws), sh(fmt.Sprintf(`chmod 4755 %q && echo CHANGED-mode`, target))...)
		if !strings.Contains(n.stdout, "CHANGED-mode") {
			t.Errorf("under none the chmod should work: %v", n)
		}
		_ = os.Chmod(target, 0o755)
	}
}

// statOf is the metadata the attack changed: mode, owner, modification
// time.
func statOf(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("mode=%o uid=%d gid=%d mtime=%d", st.Mode, st.Uid, st.Gid, st.Mtim.Sec)
}

// TestRunsCannotSeeTroupeFiles has one run read another run's private
// temp dir (the path the other run told it) and the server's spool, as the
// attack read another session's spooled output: a run sees its own temp
// dir and nothing else of troupe's.
func TestRunsCannotSeeTroupeFiles(t *testing.T) {
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) { testTroupeFilesHidden(t, driver) })
	}
}

func testTroupeFilesHidden(t *testing.T, driver string) {
	ws, _ := workspace(t)
	spool := t.TempDir()
	if err := os.WriteFile(filepath.Join(spool, "out"), []byte("SPOOLED-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(auditLog, []byte("AUDIT-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Driver: driver, Hidden: []string{spool, auditLog}, Logger: newSandbox(t, driver).log})
	if err != nil {
		t.Fatal(err)
	}
	<-s.probed
	// Run A keeps a secret in its temp dir and waits.
	a := exec.Command("/bin/sh", "-c", `echo RUN-A-SECRET > "$TMPDIR/secret"; echo "$TMPDIR"; read x`)
	a.Dir, a.Env = ws, testEnv
	stdin, err := a.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := a.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	procA, err := s.Start(policy(ProfileDefault, ws), a)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = a.Wait()
		_ = procA.Release()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	tmpA := strings.TrimSpace(line)
	root := filepath.Dir(tmpA)
	script := fmt.Sprintf(`cat %q/secret; ls -a %q; cat %q/out; cat %q; echo "own=$TMPDIR"; echo own > "$TMPDIR/f" && cat "$TMPDIR/f"`, tmpA, root, spool, auditLog)
	r := runIn(t, s, policy(ProfileDefault, ws), sh(script)...)
	for _, secret := range []string{"RUN-A-SECRET", "SPOOLED-SECRET", "AUDIT-SECRET", filepath.Base(tmpA)} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("run B saw %s: %v", secret, r)
		}
	}
	if !strings.Contains(r.stdout, "own\n") {
		t.Errorf("run B cannot use its own temp dir: %v", r)
	}
	// Under none nothing is hidden: the test can see the attack.
	n := runIn(t, s, policy(ProfileNone, ws), "/bin/cat", filepath.Join(spool, "out"))
	if !strings.Contains(n.stdout, "SPOOLED-SECRET") {
		t.Errorf("under none the spool should be readable: %v", n)
	}
}

// TestNothingOutlivesTheRun leaves processes behind the way the attack
// did (setsid, a double fork, a descendant ignoring SIGTERM), both when
// the target exits and when the run is cancelled: none may survive the
// run. A root server finds them in the run's pids cgroup; one that is not
// root has none, and relies on the PID namespace the helper's init ends.
func TestNothingOutlivesTheRun(t *testing.T) {
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) { testNothingOutlives(t, driver) })
	}
}

func testNothingOutlives(t *testing.T, driver string) {
	s := newSandbox(t, driver)
	ws, _ := workspace(t)
	for _, cancel := range []bool{false, true} {
		marker := fmt.Sprintf("1000.%d", rand.IntN(1e9))
		script := fmt.Sprintf(`setsid sleep %[1]s1 </dev/null >/dev/null 2>&1 &
( sleep %[1]s2 </dev/null >/dev/null 2>&1 & )
sh -c 'trap "" TERM; exec sleep %[1]s3' </dev/null >/dev/null 2>&1 &
echo started
read x`, marker)
		if cancel {
			script += "\nexec sleep " + marker + "4"
		}
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir, cmd.Env = ws, testEnv
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		proc, err := s.Start(policy(ProfileDefault, ws), cmd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		// They start in the background: wait until all three are there.
		for deadline := time.Now().Add(10 * time.Second); len(markedProcesses(marker)) < 3 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := len(markedProcesses(marker)); n < 3 {
			t.Fatalf("cancel=%v: only %d of the run's processes found", cancel, n)
		}
		if !cancel {
			stdin.Close() // the target exits by itself
		} else {
			// The runner's way: SIGTERM to the group, then SIGKILL.
			_ = unix.Kill(-proc.Pid(), unix.SIGTERM)
			time.Sleep(100 * time.Millisecond)
			proc.Kill()
		}
		_ = cmd.Wait()
		stdin.Close()
		if err := proc.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(markedProcesses(marker)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if left := markedProcesses(marker); len(left) > 0 {
			for _, pid := range left {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			t.Errorf("cancel=%v: %d processes outlived the run: %v", cancel, len(left), left)
		}
	}
}

// markedProcesses lists the live (not zombie) processes whose command line
// holds marker.
func markedProcesses(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestMemoryIsLimited has a run allocate (and touch) 1 GiB with a limit of
// 256 MiB, as the attack allocated 3 GiB unchecked: the allocation fails
// (RLIMIT_AS) or the kernel ends the run (memory cgroup). A modest
// allocation still works.
func TestMemoryIsLimited(t *testing.T) {
	py := python(t)
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) {
			s := newSandbox(t, driver)
			ws, _ := workspace(t)
			p := policy(ProfileDefault, ws)
			p.Limits.MaxMemoryBytes = 256 << 20
			alloc := func(mib int) result {
				return runIn(t, s, p, py, "-c", fmt.Sprintf("b = b'x' * (%d << 20); print('allocated', len(b) >> 20)", mib))
			}
			if r := alloc(1024); r.err == nil || strings.Contains(r.stdout, "allocated") {
				t.Errorf("1 GiB under a 256 MiB limit: %v", r)
			} else {
				t.Logf("refused as wanted (%s): %v %s", s.iso.MemoryCgroup, r.err, strings.TrimSpace(r.stderr))
			}
			if r := alloc(32); r.err != nil || !strings.Contains(r.stdout, "allocated 32") {
				t.Errorf("32 MiB under a 256 MiB limit: %v", r)
			}
			// Unlimited, the same allocation works: the test can see the
			// attack.
			p.Limits.MaxMemoryBytes = 0
			if r := alloc(1024); r.err != nil {
				t.Errorf("1 GiB without a limit: %v", r)
			}
		})
	}
}

// TestOrdinaryWorkRuns is the other side of the confinement: what a
// developer's tools do in a workspace still works under the default
// profile, with the default limits. A small Go module is built and tested
// (its caches in the run's temp dir) and a Node script writes in the
// workspace and the temp dir.
func TestOrdinaryWorkRuns(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	node, _ := exec.LookPath("node")
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) {
			s := newSandbox(t, driver)
			ws, _ := workspace(t)
			files := map[string]string{
				"go.mod":        "module example.com/hello\n\ngo 1.22\n",
				"hello.go":      "package main\n\nimport \"fmt\"\n\nfunc greet() string { return \"hello\" }\n\nfunc main() { fmt.Println(greet()) }\n",
				"hello_test.go": "package main\n\nimport \"testing\"\n\nfunc TestGreet(t *testing.T) {\n\tif greet() != \"hello\" {\n\t\tt.Fatal(greet())\n\t}\n}\n",
				"write.js":      "const fs = require('fs');\nfs.writeFileSync('from-node.txt', 'written by node');\nfs.writeFileSync(process.env.TMPDIR + '/scratch', 'x');\nconsole.log('node ok', fs.readFileSync(process.env.TMPDIR + '/scratch', 'utf8'));\n",
			}
			for name, body := range files {
				if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p := Policy{Profile: ProfileDefault, Workspace: ws, Limits: Limits{
				MaxProcesses: 256, MaxFileBytes: 1 << 30, MaxOpenFiles: 1024, MaxMemoryBytes: 4 << 30,
			}}
			script := `set -e
export HOME="$TMPDIR" GOCACHE="$TMPDIR/gocache" GOPATH="$TMPDIR/gopath" GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
go test -count=1 ./...
go build -o hello .
./hello
chmod +x hello`
			env := append([]string{"PATH=" + filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin"}, testEnv[1:]...)
			r := runEnv(t, s, p, env, sh(script)...)
			if r.err != nil || !strings.Contains(r.stdout, "ok  \texample.com/hello") || !strings.HasSuffix(r.stdout, "hello\n") {
				t.Fatalf("go build and test: %v", r)
			}
			if node == "" {
				t.Log("node is not on PATH: the Node half is skipped")
				return
			}
			r = runEnv(t, s, p, env, node, "write.js")
			if r.err != nil || !strings.Contains(r.stdout, "node ok x") {
				t.Fatalf("node: %v", r)
			}
			if got, err := os.ReadFile(filepath.Join(ws, "from-node.txt")); err != nil || string(got) != "written by node" {
				t.Errorf("node's file in the workspace: %q, %v", got, err)
			}
		})
	}
}

// runEnv is runIn with the target's environment.
func runEnv(t *testing.T, s *Sandbox, p Policy, env []string, argv ...string) result {
	t.Helper()
	r, err := runErrEnv(t, s, p, env, argv...)
	if err != nil {
		t.Fatalf("Start(%v): %v (stderr: %q)", argv, err, stderrOf(err))
	}
	return r
}

// TestStaleTempIsRemoved leaves what a crashed server would (a run's temp
// dir and a session's spool named with its pid) and checks the next start
// removes them, and nothing of a live server or of another name.
func TestStaleTempIsRemoved(t *testing.T) {
	tempDir := t.TempDir()
	root, err := MakeTempRoot(tempDir)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := []string{
		fmt.Sprintf("run-%d-1", dead.Process.Pid),
		fmt.Sprintf("troupe-output-%d-2", dead.Process.Pid),
	}
	kept := []string{
		fmt.Sprintf("run-%d-3", os.Getpid()),
		fmt.Sprintf("troupe-output-%d-4", os.Getpid()),
		"run-notapid",
		"something-else",
	}
	for _, name := range append(append([]string(nil), gone...), kept...) {
		if err := os.MkdirAll(filepath.Join(root, name, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := MakeTempRoot(tempDir); err != nil {
		t.Fatal(err)
	}
	for _, name := range gone {
		if _, err := os.Stat(filepath.Join(root, name)); !os.IsNotExist(err) {
			t.Errorf("%s (a dead server's) survived: %v", name, err)
		}
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			t.Errorf("%s was removed: %v", name, err)
		}
	}
}
