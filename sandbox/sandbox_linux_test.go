package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// testEnv is the environment of sandboxed test programs: enough for a
// shell and python, nothing of the test process's own. GORACE spares the
// probe program (this binary, built with -race) the race runtime's
// one-second sleep at exit.
var testEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C", "GORACE=atexit_sleep_ms=0", "TROUPE_TEST_SERVER_PID=" + strconv.Itoa(os.Getpid())}

// newSandbox makes a Sandbox for a test, logging into the test log.
func newSandbox(t testing.TB, driver string) *Sandbox {
	t.Helper()
	s, err := New(Options{Driver: driver, Logger: slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	<-s.probed // tests read the probe's results directly
	return s
}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// workspace makes a workspace directory (symlinks resolved) and a sibling
// directory outside it.
func workspace(t testing.TB) (ws, outside string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, outside = filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return ws, outside
}

// requireEnforceable skips when this machine cannot enforce p, but fails
// when it should be able to: Landlock, as the kernel reports it here, and
// seccomp on a supported architecture are what the default profile needs,
// so a probe that misses them is a bug, not an excuse.
func requireEnforceable(t testing.TB, s *Sandbox, p Policy) {
	t.Helper()
	err := s.Check(p)
	if err == nil {
		return
	}
	abi, _ := llsys.LandlockGetABIVersion()
	if s.driver == DriverBuiltin && abi > 0 && seccompArch != 0 && (p.Limits.MaxProcesses == 0 || os.Getuid() != 0) {
		t.Fatalf("Check refuses although the kernel has Landlock ABI %d: %v (isolation: %v, missing: %v)", abi, err, s.Isolation(), s.Isolation().Missing)
	}
	t.Skipf("cannot enforce here: %v", err)
}

// result is what one sandboxed run did.
type result struct {
	stdout, stderr string
	err            error // from Wait
	proc           *Process
}

func (r result) String() string {
	return fmt.Sprintf("err=%v stdout=%q stderr=%q", r.err, r.stdout, r.stderr)
}

// runIn runs argv under p, waits (at most a minute) and releases.
func runIn(t testing.TB, s *Sandbox, p Policy, argv ...string) result {
	t.Helper()
	r, err := runErr(t, s, p, argv...)
	if err != nil {
		t.Fatalf("Start(%v): %v (stderr: %q)", argv, err, stderrOf(err))
	}
	return r
}

func runErr(t testing.TB, s *Sandbox, p Policy, argv ...string) (result, error) {
	t.Helper()
	return runErrEnv(t, s, p, testEnv, argv...)
}

// runErrEnv is runErr with the target's environment.
func runErrEnv(t testing.TB, s *Sandbox, p Policy, env []string, argv ...string) (result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = p.Workspace
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// On timeout, the whole group goes (cmd.Process is set by then).
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	proc, err := s.Start(p, cmd)
	if err != nil {
		return result{}, err
	}
	werr := cmd.Wait()
	if err := proc.Release(); err != nil {
		t.Errorf("Release: %v", err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), err: werr, proc: proc}, nil
}

func stderrOf(err error) string {
	var se *StartError
	if errors.As(err, &se) {
		return se.Stderr
	}
	return ""
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// profiles are the two sides of every escape test: refused under default,
// allowed under none.
var profiles = []Profile{ProfileDefault, ProfileNone}

func policy(profile Profile, ws string) Policy {
	return Policy{Profile: profile, Workspace: ws, Limits: Limits{MaxProcesses: 256}}
}

// python finds a real python3 (not a version-manager shim, which wants to
// write its own state) for the tests that fork.
func python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("python3 not found in /usr/bin or /usr/local/bin")
	return ""
}

func TestIsolationMatchesKernel(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	iso := s.Isolation()
	t.Logf("isolation: %v; missing: %v", iso, iso.Missing)
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		abi = 0
	}
	if iso.LandlockABI != abi {
		t.Errorf("LandlockABI = %d, kernel says %d", iso.LandlockABI, abi)
	}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err == nil && seccompArch != 0 && !iso.Seccomp {
		t.Errorf("seccomp works here but Isolation says no: %v", iso.Missing)
	}
	if iso.Root != (os.Getuid() == 0) {
		t.Errorf("Root = %v", iso.Root)
	}
	if iso.Driver != DriverBuiltin || !strings.HasSuffix(iso.String(), "driver builtin") {
		t.Errorf("driver: %v", iso)
	}
	want := fmt.Sprintf("landlock abi %d", abi)
	if abi > 0 && !strings.HasPrefix(iso.String(), want) {
		t.Errorf("String() = %q, want it to start with %q", iso.String(), want)
	}
}

func TestNewRejectsUnknownDriver(t *testing.T) {
	if _, err := New(Options{Driver: "docker"}); err == nil || !strings.Contains(err.Error(), "docker") {
		t.Fatalf("New(docker) = %v", err)
	}
	for _, d := range []string{"", DriverAuto} {
		s, err := New(Options{Driver: d})
		if err != nil || s.Isolation().Driver != DriverBuiltin {
			t.Errorf("New(%q) = %v, %v; want the builtin driver", d, s, err)
		}
	}
}

// TestFilesystemEscapes runs each write attempt under both profiles: the
// default profile must refuse it, none must allow it (proving the attempt
// itself is sound).
func TestFilesystemEscapes(t *testing.T) {
	testFilesystemEscapes(t, DriverBuiltin)
}

func testFilesystemEscapes(t *testing.T, driver string) {
	s := newSandbox(t, driver)
	ws, outside := workspace(t)
	requireEnforceable(t, s, policy(ProfileDefault, ws))
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	tmpName := fmt.Sprintf("/tmp/troupe-escape-%d-%s", os.Getpid(), driver)
	t.Cleanup(func() { os.Remove(tmpName) })
	cases := []struct {
		name, script string
		written      string // the file that must not exist after a refused write
	}{
		{"outside the workspace", `echo x > "$OUT/f"`, filepath.Join(outside, "f")},
		{"into /tmp proper", `echo x > ` + tmpName, tmpName},
		{"through a symlink in the workspace", `echo x > "$WS/link/g"`, filepath.Join(outside, "g")},
		{"mkdir outside", `mkdir "$OUT/d"`, filepath.Join(outside, "d")},
		{"symlink created outside", `ln -s /etc "$OUT/l"`, filepath.Join(outside, "l")},
	}
	for _, c := range cases {
		for _, prof := range profiles {
			t.Run(c.name+"/"+string(prof), func(t *testing.T) {
				os.RemoveAll(c.written)
				script := fmt.Sprintf("WS=%q OUT=%q; %s", ws, outside, c.script)
				r := runIn(t, s, policy(prof, ws), sh(script)...)
				_, statErr := os.Lstat(c.written)
				if prof == ProfileNone {
					if r.err != nil || statErr != nil {
						t.Fatalf("unconfined write failed: %v; stat: %v", r, statErr)
					}
					return
				}
				if r.err == nil || statErr == nil {
					t.Fatalf("write escaped the sandbox: %v; file exists: %v", r, statErr == nil)
				}
				if !strings.Contains(r.stderr, "denied") && !strings.Contains(r.stderr, "Read-only") {
					t.Errorf("stderr does not say why: %q", r.stderr)
				}
			})
		}
	}
	t.Run("inside the workspace and the private temp dir", func(t *testing.T) {
		for _, prof := range profiles {
			script := `set -e; cd "$WS"; echo x > f; mkdir -p a b; echo y > a/m; mv a/m b/m; ln b/m b/hard; ln -s f sym; cat sym b/hard; rm -r a b f sym
				echo w > /dev/null; : < /dev/zero`
			if prof == ProfileDefault {
				// Only the default profile has a private temp dir.
				script += `; echo z > "$TMPDIR/t"; cat "$TMPDIR/t"; echo "tmp=$TMPDIR"`
			}
			r := runIn(t, s, policy(prof, ws), sh(fmt.Sprintf("WS=%q; %s", ws, script))...)
			if r.err != nil || !strings.HasPrefix(r.stdout, "x\ny\n") {
				t.Fatalf("%s: %v", prof, r)
			}
			if prof == ProfileDefault {
				if !strings.HasPrefix(r.stdout, "x\ny\nz\n") {
					t.Fatalf("private temp dir: %v", r)
				}
				tmp := strings.TrimSpace(r.stdout[strings.Index(r.stdout, "tmp=")+4:])
				if filepath.Dir(tmp) != s.tempRoot || !strings.HasPrefix(filepath.Base(tmp), "run-") {
					t.Errorf("TMPDIR = %q, want a private dir in %s", tmp, s.tempRoot)
				}
				if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("private temp dir %s survived Release: %v", tmp, err)
				}
			}
		}
	})
}

// listeners are a loopback TCP and UDP service the network tests try to
// reach; got counts what arrived.
type listeners struct {
	tcp net.Listener
	udp net.PacketConn
	mu  sync.Mutex
	got int
	wg  sync.WaitGroup
}

func listen(t *testing.T) *listeners {
	t.Helper()
	l := &listeners{}
	var err error
	if l.tcp, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if l.udp, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		for {
			c, err := l.tcp.Accept()
			if err != nil {
				return
			}
			l.count()
			c.Close()
		}
	}()
	go func() {
		defer l.wg.Done()
		buf := make([]byte, 64)
		for {
			if _, _, err := l.udp.ReadFrom(buf); err != nil {
				return
			}
			l.count()
		}
	}()
	t.Cleanup(func() {
		l.tcp.Close()
		l.udp.Close()
		l.wg.Wait()
	})
	return l
}

func (l *listeners) count() {
	l.mu.Lock()
	l.got++
	l.mu.Unlock()
}

// received waits a little for a datagram or connection to arrive and
// returns how many did.
func (l *listeners) received() int {
	time.Sleep(100 * time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.got
	l.got = 0
	return n
}

func TestNetworkEscapes(t *testing.T) {
	testNetworkEscapes(t, DriverBuiltin)
}

func testNetworkEscapes(t *testing.T, driver string) {
	s := newSandbox(t, driver)
	ws, _ := workspace(t)
	requireEnforceable(t, s, policy(ProfileDefault, ws))
	l := listen(t)
	for _, c := range []struct{ proto, addr string }{{"tcp", l.tcp.Addr().String()}, {"udp", l.udp.LocalAddr().String()}} {
		for _, prof := range []Profile{ProfileDefault, ProfileNone, "default+network"} {
			t.Run(c.proto+"/"+string(prof), func(t *testing.T) {
				p := policy(prof, ws)
				if prof == "default+network" {
					p = policy(ProfileDefault, ws)
					p.AllowNetwork = true
				}
				r := runIn(t, s, p, testBinary(t), probeArg, c.proto, c.addr)
				n := l.received()
				if prof == ProfileDefault {
					if r.err == nil || n != 0 || !strings.Contains(r.stdout, "denied") {
						t.Fatalf("%s egress escaped: %v; the listener got %d", c.proto, r, n)
					}
					t.Logf("refused as wanted: %s", strings.TrimSpace(r.stdout))
					return
				}
				if r.err != nil || n != 1 {
					t.Fatalf("%s egress should work: %v; the listener got %d", c.proto, r, n)
				}
			})
		}
	}
	t.Run("unix sockets stay allowed", func(t *testing.T) {
		r := runIn(t, s, policy(ProfileDefault, ws), testBinary(t), probeArg, "unix-socket")
		if r.err != nil {
			t.Fatal(r)
		}
	})
}

// TestSyscallEscapes checks the seccomp filter, Landlock's signal scope and
// the capability drop through a probe program.
func TestSyscallEscapes(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	requireEnforceable(t, s, policy(ProfileDefault, ws))
	actions := []string{"ptrace", "io_uring", "keyring", "personality"}
	if s.Isolation().LandlockABI >= 6 {
		actions = append(actions, "signal-server")
	}
	for _, action := range actions {
		for _, prof := range profiles {
			t.Run(action+"/"+string(prof), func(t *testing.T) {
				r := runIn(t, s, policy(prof, ws), testBinary(t), probeArg, action)
				if prof == ProfileNone {
					if r.err != nil {
						t.Fatalf("unconfined %s failed: %v", action, r)
					}
					return
				}
				if r.err == nil || !strings.Contains(r.stdout, "denied") {
					t.Fatalf("%s not refused: %v", action, r)
				}
			})
		}
	}
	t.Run("no capabilities", func(t *testing.T) {
		r := runIn(t, s, policy(ProfileDefault, ws), testBinary(t), probeArg, "caps")
		for _, want := range []string{"CapEff: 0000000000000000", "CapPrm: 0000000000000000", "CapInh: 0000000000000000", "CapAmb: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2"} {
			if !containsLine(r.stdout, want) {
				t.Errorf("want %q in %v", want, r)
			}
		}
		if os.Getuid() == 0 && !strings.Contains(r.stdout, "CapBnd: 0000000000000000") {
			t.Errorf("root helper kept a bounding set: %v", r)
		}
	})
}

// TestServerEnvironIsProtected reads the server's /proc/<pid>/environ, which
// holds its secrets, from a child. The server must be non-dumpable
// (ProtectProcess) for that to fail for a same-uid child without
// capabilities, and ProtectProcess changes the whole process, so the test
// re-executes itself and the child plays the server.
func TestServerEnvironIsProtected(t *testing.T) {
	const childEnv = "TROUPE_SANDBOX_TEST_ENVIRON_CHILD"
	if os.Getenv(childEnv) == "" {
		secret := fmt.Sprintf("troupe-secret-%d", time.Now().UnixNano())
		cmd := exec.Command(testBinary(t), "-test.run=^TestServerEnvironIsProtected$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", "TROUPE_SANDBOX_TEST_SECRET="+secret)
		out, err := cmd.CombinedOutput()
		t.Logf("child:\n%s", out)
		if err != nil {
			t.Fatalf("child test failed: %v", err)
		}
		if bytes.Contains(out, []byte("--- SKIP")) {
			t.Skip("the child skipped")
		}
		return
	}
	secret := os.Getenv("TROUPE_SANDBOX_TEST_SECRET")
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	requireEnforceable(t, s, policy(ProfileDefault, ws))
	probe := []string{testBinary(t), probeArg, "environ", secret}
	// Not root, an unconfined tool is a same-uid reader without
	// capabilities: only non-dumpability keeps it out. (As root, a reader
	// that dropped its capabilities is kept out anyway: the kernel wants
	// the reader's permitted capabilities to cover the target's.)
	nonRoot := os.Getuid() != 0
	if nonRoot {
		if r := runIn(t, s, policy(ProfileNone, ws), probe...); r.err != nil {
			t.Fatalf("control: a same-uid child cannot read an unprotected server's environ: %v", r)
		}
	}
	if err := ProtectProcess(); err != nil {
		t.Fatal(err)
	}
	if d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); d != 0 {
		t.Fatalf("dumpable = %d after ProtectProcess", d)
	}
	if r := runIn(t, s, policy(ProfileDefault, ws), probe...); r.err == nil || !strings.Contains(r.stdout, "denied") {
		t.Errorf("sandboxed child read the server's environ: %v", r)
	}
	r := runIn(t, s, policy(ProfileNone, ws), probe...)
	switch {
	case nonRoot && r.err == nil:
		t.Errorf("same-uid child read the protected server's environ: %v", r)
	case !nonRoot && r.err != nil:
		// Root with CAP_SYS_PTRACE is beyond any of this: that is what the
		// default profile's capability drop is for.
		t.Errorf("unconfined root child should read it: %v", r)
	}
}

// bomb tries to start 150 children that sleep (a bounded fork bomb: it
// never exceeds 150 processes even unconfined) and prints how many it got.
// The children close stdout so Wait does not wait for them.
const bomb = `
import os, time
n = 0
for i in range(150):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        os.close(1); os.close(2)
        time.sleep(60)
        os._exit(0)
    n += 1
print(n)
`

func TestForkBombIsLimited(t *testing.T) {
	py := python(t)
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	for _, prof := range profiles {
		t.Run(string(prof), func(t *testing.T) {
			p := policy(prof, ws)
			p.Limits.MaxProcesses = 64
			requireEnforceable(t, s, p)
			cmd := exec.Command(py, "-c", bomb)
			cmd.Env = testEnv
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			proc, err := s.Start(p, cmd)
			if err != nil {
				t.Fatal(err)
			}
			werr := cmd.Wait()
			n, _ := strconv.Atoi(strings.TrimSpace(out.String()))
			t.Logf("%s: %d children started (%v)", prof, n, werr)
			var survivors []int
			if proc.pidsCgroup() != nil {
				survivors, _ = proc.pidsCgroup().members()
			}
			if err := proc.Release(); err != nil {
				t.Fatal(err)
			}
			if prof == ProfileNone {
				if werr != nil || n != 150 {
					t.Fatalf("unconfined: %d children, %v: %s", n, werr, out.String())
				}
				return
			}
			if werr != nil || n <= 0 || n >= 64 {
				t.Fatalf("confined: %d children (want 1..63), %v: %s", n, werr, out.String())
			}
			if proc.pidsCgroup() != nil {
				if len(survivors) != n {
					t.Errorf("cgroup had %d members before Release, want the %d children", len(survivors), n)
				}
				if _, err := os.Stat(proc.pidsCgroup().dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("cgroup %s survived Release", proc.pidsCgroup().dir)
				}
				assertGone(t, survivors)
			}
		})
	}
}

// assertGone fails if any of pids is still a live (non-zombie) process.
// Release has waited for them, so there is no grace period.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// "pid (comm) state ...": zombies wait for init to reap them.
		if f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:])); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			t.Errorf("process %d still alive: %s", pid, data)
		}
	}
}

// lineWriter records output and reports the first time want appears.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

// TestKillTakesTheWholeTree starts a tree that ignores SIGTERM, with one
// member that left the process group (setsid): SIGTERM to the group leaves
// it running, Kill ends all of it.
func TestKillTakesTheWholeTree(t *testing.T) {
	testKillTree(t, DriverBuiltin)
}

func testKillTree(t *testing.T, driver string) {
	s := newSandbox(t, driver)
	ws, _ := workspace(t)
	for _, prof := range profiles {
		t.Run(string(prof), func(t *testing.T) {
			p := policy(prof, ws)
			requireEnforceable(t, s, p)
			script := `trap '' TERM; (trap '' TERM; sleep 300; :) & sleep 300 &`
			escapes := prof == ProfileDefault && (s.cg != nil || driver == DriverBwrap)
			if escapes {
				// Only a cgroup (or bwrap's pid namespace) can catch this one.
				script += ` setsid sleep 300 &`
			}
			script += ` echo started; wait`
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Env = testEnv
			w := &lineWriter{want: "started", seen: make(chan struct{})}
			cmd.Stdout, cmd.Stderr = w, w
			proc, err := s.Start(p, cmd)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-w.seen:
			case <-time.After(30 * time.Second):
				proc.Kill()
				cmd.Wait()
				proc.Release()
				t.Fatal("tree did not start")
			}
			time.Sleep(50 * time.Millisecond) // let setsid do its work
			members := treeOf(t, proc)
			t.Logf("%d processes in the run", len(members))
			if len(members) < 4 {
				t.Errorf("want at least sh, a subshell and two sleeps, got %v", members)
			}
			if driver != DriverBwrap {
				// (bwrap itself dies of SIGTERM and takes the sandbox with
				// it, so under bwrap there is no tree left to test after.)
				_ = syscall.Kill(-proc.Pid(), syscall.SIGTERM)
				time.Sleep(300 * time.Millisecond)
				for _, pid := range members {
					if err := unix.Kill(pid, 0); err != nil {
						t.Errorf("%d died of SIGTERM, the test proves nothing", pid)
					}
				}
			}
			start := time.Now()
			proc.Kill()
			proc.Kill() // idempotent
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Logf("Wait after Kill: %v in %v", err, time.Since(start))
			case <-time.After(10 * time.Second):
				t.Fatal("Wait did not return after Kill: something holds stdout")
			}
			if err := proc.Release(); err != nil {
				t.Error(err)
			}
			proc.Kill() // after Release: nothing
			assertGone(t, members)
		})
	}
}

// treeOf lists the run's processes: the cgroup's members when there is
// one, else the process group's.
func treeOf(t *testing.T, proc *Process) []int {
	t.Helper()
	if proc.pidsCgroup() != nil {
		pids, err := proc.pidsCgroup().members()
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pgid, err := unix.Getpgid(pid); err == nil && pgid == proc.Pid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestReleaseRemovesEverything(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	p := policy(ProfileDefault, ws)
	requireEnforceable(t, s, p)
	cmd := exec.Command("/bin/sh", "-c", `mkdir "$TMPDIR/ro"; echo x > "$TMPDIR/ro/f"; chmod 0500 "$TMPDIR/ro"; echo "$TMPDIR"`)
	cmd.Env = testEnv
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	proc, err := s.Start(p, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	tmp := strings.TrimSpace(out.String())
	if fi, err := os.Stat(tmp); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("private temp dir %s: %v, %v", tmp, fi, err)
	}
	if err := proc.Release(); err != nil {
		t.Fatal(err)
	}
	if err := proc.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir survived: %v", err)
	}
	if proc.pidsCgroup() != nil {
		if _, err := os.Stat(proc.pidsCgroup().dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup survived: %v", err)
		}
	}
}

// TestStaleCgroupsAreRemoved plays a crashed server: a run cgroup named
// after a pid that no longer exists, with a process still in it.
func TestStaleCgroupsAreRemoved(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	if s.cg == nil {
		t.Skip("no pids cgroup here")
	}
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale, err := s.cg.create(fmt.Sprintf("run-%d-dead-1", dead.Process.Pid), 8)
	if err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command("/bin/sleep", "300")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	procs, err := stale.openProcs()
	if err == nil {
		_, err = procs.WriteString(strconv.Itoa(orphan.Process.Pid))
		procs.Close()
	}
	if err != nil {
		orphan.Process.Kill()
		orphan.Wait()
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- orphan.Wait() }()
	newSandbox(t, DriverBuiltin) // a new server starts
	select {
	case err := <-waited:
		t.Logf("orphan ended: %v", err)
	case <-time.After(10 * time.Second):
		orphan.Process.Kill()
		<-waited
		t.Fatal("the stale cgroup's process survived New")
	}
	if _, err := os.Stat(stale.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale cgroup survived New: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	requireEnforceable(t, s, policy(ProfileDefault, ws))
	plain := filepath.Join(ws, "plain")
	if err := os.WriteFile(plain, []byte("just text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(ws, "garbage")
	if err := os.WriteFile(garbage, []byte{0x7f, 'E', 'L', 'F', 0, 0, 0, 0}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, prof := range profiles {
		for _, c := range []struct {
			name  string
			cmd   *exec.Cmd
			errno syscall.Errno
		}{
			{"missing path", exec.Command("/nonexistent/program"), syscall.ENOENT},
			{"not on PATH", exec.Command("troupe-no-such-program"), syscall.ENOENT},
			{"not executable", exec.Command(plain), syscall.EACCES},
			{"not a program", exec.Command(garbage), syscall.ENOEXEC},
		} {
			t.Run(string(prof)+"/"+c.name, func(t *testing.T) {
				c.cmd.Env = testEnv
				proc, err := s.Start(policy(prof, ws), c.cmd)
				if err == nil {
					c.cmd.Wait()
					proc.Release()
					t.Fatal("Start succeeded")
				}
				var se *StartError
				if !errors.As(err, &se) || se.Stage != "exec" || !errors.Is(err, c.errno) {
					t.Fatalf("got %#v (%v), want an exec StartError wrapping %v", err, err, c.errno)
				}
				if msg := err.Error(); strings.Contains(msg, "/nonexistent") || strings.Contains(msg, os.TempDir()) {
					t.Errorf("message names a host path: %q", msg)
				}
				t.Logf("%v (stderr: %q)", err, se.Stderr)
			})
		}
	}
	t.Run("setup failure in the helper", func(t *testing.T) {
		p := policy(ProfileDefault, ws)
		p.Limits.MaxOpenFiles = 1 << 40 // beyond fs.nr_open
		cmd := exec.Command("/bin/true")
		proc, err := s.Start(p, cmd)
		if err == nil {
			cmd.Wait()
			proc.Release()
			t.Fatal("Start succeeded")
		}
		var se *StartError
		if !errors.As(err, &se) || se.Stage != "rlimit" || se.Stderr == "" {
			t.Fatalf("got %#v", err)
		}
		t.Logf("%v (stderr: %q)", err, se.Stderr)
	})
	t.Run("unenforceable policy", func(t *testing.T) {
		_, err := s.Start(Policy{Profile: ProfileDefault, Workspace: filepath.Join(ws, "missing")}, exec.Command("/bin/true"))
		var se *StartError
		var ue *UnenforceableError
		if !errors.As(err, &se) || se.Stage != "policy" || !errors.As(err, &ue) {
			t.Fatalf("got %v", err)
		}
		if strings.Contains(err.Error(), ws) {
			t.Errorf("message names the path: %v", err)
		}
	})
	t.Run("SysProcAttr already set", func(t *testing.T) {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		var se *StartError
		if _, err := s.Start(policy(ProfileNone, ws), cmd); !errors.As(err, &se) || se.Stage != "command" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing temp dir parent", func(t *testing.T) {
		s2, err := New(Options{TempDir: filepath.Join(t.TempDir(), "no-such-dir")})
		if err != nil {
			t.Fatal(err)
		}
		var se *StartError
		if _, err := s2.Start(policy(ProfileDefault, ws), exec.Command("/bin/true")); !errors.As(err, &se) || se.Stage != "tempdir" {
			t.Fatalf("got %v", err)
		}
	})
}

// TestCheckExplains builds sandboxes that lack what a policy needs and
// checks that Check refuses, fail-closed, with a way out.
func TestCheckExplains(t *testing.T) {
	ws, _ := workspace(t)
	base := newSandbox(t, DriverBuiltin)
	for _, c := range []struct {
		name  string
		edit  func(s *Sandbox)
		p     Policy
		wants []string
	}{
		{"no landlock", func(s *Sandbox) { s.iso.LandlockABI = 0 }, policy(ProfileDefault, ws), []string{"Landlock", "5.13", "bubblewrap", `sandbox_profile = "none"`}},
		{"no seccomp", func(s *Sandbox) { s.iso.Seccomp = false }, policy(ProfileSeatbelt, ws), []string{"seccomp", `sandbox_profile = "none"`}},
		{"bwrap missing", func(s *Sandbox) { s.driver = DriverBwrap; s.iso.Bwrap = "" }, policy(ProfileDefault, ws), []string{"bubblewrap", `sandbox_profile = "none"`}},
		{"root without pids cgroup", func(s *Sandbox) { s.iso.Root = true; s.iso.PidsCgroup = ""; s.cg = nil }, Policy{Profile: ProfileDefault, Workspace: ws, Limits: Limits{MaxProcesses: 10}}, []string{"max_processes = 0", "pids cgroup", "RLIMIT_NPROC"}},
		{"non-root without userns or cgroup", func(s *Sandbox) { s.iso.Root = false; s.iso.UserNS = false; s.iso.PidsCgroup = ""; s.cg = nil }, Policy{Profile: ProfileDefault, Workspace: ws, Limits: Limits{MaxProcesses: 10}}, []string{"max_processes = 0", "user namespaces"}},
		{"helper not wired", func(s *Sandbox) { s.helperOK = false }, policy(ProfileDefault, ws), []string{"HelperMain", HelperArg, `sandbox_profile = "none"`}},
		{"relative workspace", nil, Policy{Profile: ProfileDefault, Workspace: "ws"}, []string{"absolute"}},
		{"unknown profile", nil, Policy{Profile: "strict", Workspace: ws}, []string{"unknown profile"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Sandbox{log: base.log, driver: base.driver, helper: base.helper, tempDir: base.tempDir, iso: base.Isolation(), cg: base.cg, uid: base.uid, gid: base.gid, helperOK: base.helperOK, probed: base.probed}
			if c.edit != nil {
				c.edit(s)
			}
			err := s.Check(c.p)
			var ue *UnenforceableError
			if !errors.As(err, &ue) {
				t.Fatalf("Check = %v, want an UnenforceableError", err)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), ws) {
				t.Errorf("names a host path: %v", err)
			}
		})
	}
	if err := base.Check(Policy{Profile: ProfileNone}); err != nil {
		t.Errorf("none must always be enforceable: %v", err)
	}
}

// TestCallerFilesAndEnv: the caller's ExtraFiles keep their numbers in the
// target, the target gets exactly its environment (plus the temp dir
// variables, replacing the caller's), and the helper does not see it.
func TestCallerFilesAndEnv(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	p := policy(ProfileDefault, ws)
	requireEnforceable(t, s, p)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", `echo via-fd3 >&3; echo "A=$A TMPDIR=$TMPDIR TMP=$TMP"; env | sort | tr '\n' ' '; echo`)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "A=1", "A=2", "TMPDIR=/tmp"}
	cmd.ExtraFiles = []*os.File{w}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	proc, err := s.Start(p, cmd)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	proc.Release()
	via3, _ := io.ReadAll(r)
	if werr != nil || string(via3) != "via-fd3\n" {
		t.Fatalf("fd 3: %q, %v: %s", via3, werr, out.String())
	}
	o := out.String()
	t.Log(o)
	if !strings.Contains(o, "A=2 TMPDIR="+TempRoot(s.tempDir)+"/run-") || strings.Contains(o, "TMPDIR=/tmp ") {
		t.Errorf("environment: %s", o)
	}

	// The target's fds, seen from outside while it sleeps: 0-2 and the
	// caller's 3; nothing of the helper's (config, status, cgroup) and
	// nothing this test process inherited from its own parent.
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	cmd = exec.Command("/bin/sleep", "30")
	cmd.Env = testEnv
	cmd.ExtraFiles = []*os.File{w2}
	proc, err = s.Start(p, cmd)
	w2.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The dynamic loader holds a file open for a moment after exec, so
	// look until the set settles; a leaked fd never goes away.
	var got string
	var links []string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		// In init mode (a PID namespace) the target is the helper's
		// grandchild.
		pid := descendantNamed(proc.Pid(), "sleep")
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue
		}
		var fds []string
		links = links[:0]
		for _, e := range entries {
			fds = append(fds, e.Name())
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
			links = append(links, e.Name()+"->"+l)
		}
		if got = strings.Join(fds, " "); got == "0 1 2 3" {
			break
		}
	}
	proc.Kill()
	cmd.Wait()
	proc.Release()
	if got != "0 1 2 3" {
		t.Errorf("the target has fds %q, want 0 1 2 3: %v", got, links)
	}
}

func TestTargetEnv(t *testing.T) {
	got := strings.Join(targetEnv([]string{"A=1", "TMP=x", "B=2", "A=3", "bogus"}, "", "/t"), " ")
	if want := "A=3 TMP=/t B=2 TMPDIR=/t TEMP=/t"; got != want {
		t.Errorf("targetEnv = %q, want %q", got, want)
	}
}

// TestNoFDLeaks runs a few processes (started, failed) and compares our
// open fds before and after.
func TestNoFDLeaks(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	p := policy(ProfileDefault, ws)
	requireEnforceable(t, s, p)
	runIn(t, s, p, "/bin/true") // warm up lazily opened runtime fds
	// Namespace fds are the pool's (root), whose size varies with the
	// runs; none may be open outside it.
	pooled := func() int {
		if s.ns == nil {
			return 0
		}
		s.ns.wait()
		return 2 * len(s.ns.ready)
	}
	poolBefore := pooled()
	before, nsBefore := openFDs(t)
	for range 3 {
		runIn(t, s, p, "/bin/true")
		runIn(t, s, policy(ProfileNone, ws), "/bin/true")
		if _, err := runErr(t, s, p, "/nonexistent"); err == nil {
			t.Fatal("want a StartError")
		}
	}
	// A pair a run took is closed once its helper has started, which may
	// come a moment after the run's end, and a loaded machine may still be
	// closing a run's pipes: wait for the namespace fds outside the pool,
	// and any others, to be gone (a leak stays).
	poolAfter := pooled()
	after, nsAfter := openFDs(t)
	for end := time.Now().Add(5 * time.Second); (nsAfter != poolAfter || after != before) && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
		poolAfter = pooled()
		after, nsAfter = openFDs(t)
	}
	if after != before {
		t.Errorf("open fds: %d before, %d after", before, after)
	}
	if nsAfter != poolAfter {
		t.Errorf("namespace fds outside the pool: %d left open (%d before the runs, the pool held %d then and %d now)",
			nsAfter-poolAfter, nsBefore, poolBefore, poolAfter)
	}
}

// openFDs counts this process's open fds: namespaces apart.
func openFDs(t *testing.T) (files, namespaces int) {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		link, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if strings.HasPrefix(link, "net:[") || strings.HasPrefix(link, "ipc:[") {
			namespaces++
		} else {
			files++
		}
	}
	return files, namespaces
}

func TestConcurrentStarts(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	p := policy(ProfileDefault, ws)
	requireEnforceable(t, s, p)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r, err := runErr(t, s, p, sh(fmt.Sprintf(`echo %d > "$TMPDIR/f"; cat "$TMPDIR/f"`, i))...)
			if err != nil || r.err != nil || strings.TrimSpace(r.stdout) != strconv.Itoa(i) {
				t.Errorf("run %d: %v %v", i, err, r)
			}
		})
	}
	wg.Wait()
}

// testBinary is this test binary's absolute path: the probe program.
func testBinary(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func containsLine(out, line string) bool {
	return slices.Contains(strings.Split(out, "\n"), line)
}

// TestHelperNotWired: a server binary that does not dispatch HelperArg to
// HelperMain cannot run confined tools, and Check says so instead of every
// Start failing obscurely.
func TestHelperNotWired(t *testing.T) {
	// A helper from another build answers the probe, but with another
	// protocol: it is not used either.
	other := filepath.Join(t.TempDir(), "other-helper")
	if err := os.WriteFile(other, []byte("#!/bin/sh\necho troupe-sandbox/0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, helper := range []string{"/bin/false", other} {
		s, err := New(Options{Helper: helper})
		if err != nil {
			t.Fatal(err)
		}
		ws, _ := workspace(t)
		err = s.Check(policy(ProfileDefault, ws))
		if err == nil || !strings.Contains(err.Error(), "HelperMain") {
			t.Fatalf("%s: Check = %v; want a refusal naming HelperMain (missing: %v)", helper, err, s.Isolation().Missing)
		}
		if err := s.Check(policy(ProfileNone, ws)); err != nil {
			t.Errorf("%s: none needs no helper: %v", helper, err)
		}
	}
}

// TestDynamicallyLinked tells a dynamically linked program (the system's
// shell) from files that are not (a script); the hint troupe logs about
// troupe-sandbox rests on it.
func TestDynamicallyLinked(t *testing.T) {
	if !dynamicallyLinked("/bin/sh") {
		t.Skip("/bin/sh is not dynamically linked here")
	}
	script := filepath.Join(t.TempDir(), "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	for _, p := range []string{script, "/no/such/file"} {
		if dynamicallyLinked(p) {
			t.Errorf("%s: reported dynamically linked", p)
		}
	}
}

// descendantNamed is pid or the first of its descendants whose comm is
// name; pid when there is none.
func descendantNamed(pid int, name string) int {
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); err == nil && strings.TrimSpace(string(comm)) == name {
			return p
		}
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, task := range tasks {
			children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, task.Name()))
			for _, f := range strings.Fields(string(children)) {
				if c, err := strconv.Atoi(f); err == nil {
					queue = append(queue, c)
				}
			}
		}
	}
	return pid
}

// pidsCgroup is the run's pids cgroup, nil without one.
func (p *Process) pidsCgroup() *runCgroup {
	for _, cg := range p.cgs {
		if cg.controller == "pids" {
			return cg
		}
	}
	return nil
}
