package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Nested user namespaces (issue 23): a user namespace hands a run every
// capability over new namespaces of its own, kernel attack surface no
// tool needs, so a run may create one only when its policy allows it.

// requireUnshare skips without util-linux's unshare, the attacker's tool.
func requireUnshare(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("util-linux unshare is not installed")
	}
	return path
}

// TestNestedUserNamespacesRefused: a confined run cannot make a user
// namespace, by unshare(2) or clone(2), under either driver; the programs
// that only fork (a shell, Go's os/exec, glibc's posix_spawn, which tries
// clone3 first) still work.
func TestNestedUserNamespacesRefused(t *testing.T) {
	unshare := requireUnshare(t)
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) {
			s := newSandbox(t, driver)
			ws, _ := workspace(t)
			p := policy(ProfileDefault, ws)
			requireEnforceable(t, s, p)
			for _, argv := range [][]string{
				{unshare, "-U", "true"},
				{unshare, "-U", "-r", "true"},
				{testBinary(t), probeArg, "clone-newuser"},
			} {
				r := runIn(t, s, p, argv...)
				if r.err == nil {
					t.Errorf("%v made a user namespace: %v", argv, r)
				}
			}
			for _, argv := range [][]string{
				sh("/bin/true && echo forked"),
				{testBinary(t), probeArg, "exec", "/bin/echo", "forked"},
			} {
				r := runIn(t, s, p, argv...)
				if r.err != nil || !strings.Contains(r.stdout, "forked") {
					t.Errorf("%v: %v", argv, r)
				}
			}
			// clone3's flags are in memory the filter cannot read: it is
			// refused as unknown, which libcs answer by using clone.
			if r := runIn(t, s, p, testBinary(t), probeArg, "clone3"); !strings.Contains(r.stdout, "ENOSYS") {
				t.Errorf("clone3: %v", r)
			}
			if py, err := exec.LookPath("python3"); err == nil {
				r := runIn(t, s, p, py, "-c", "import os, subprocess; subprocess.run(['/bin/echo', 'forked'], check=True); os.posix_spawn('/bin/true', ['true'], {})")
				if r.err != nil || !strings.Contains(r.stdout, "forked") {
					t.Errorf("python's subprocess and posix_spawn: %v", r)
				}
			}
			// Under none nothing is refused: the test can see the attack.
			if r := runIn(t, s, Policy{Profile: ProfileNone, Workspace: ws}, unshare, "-U", "true"); r.err != nil {
				t.Logf("unshare -U fails even unconfined here: %v", r)
			}
		})
	}
}

// nestedSetup is a policy like the Codex app-server's: network on, a
// writable directory of its own beneath a hidden one, user namespaces
// allowed.
type nestedSetup struct {
	p                       Policy
	ws, outside             string
	hidden, own, hiddenFile string
}

func newNestedSetup(t *testing.T) nestedSetup {
	t.Helper()
	ws, outside := workspace(t)
	root := filepath.Dir(ws)
	n := nestedSetup{ws: ws, outside: outside,
		hidden: filepath.Join(root, "codex"), hiddenFile: filepath.Join(root, "audit.log")}
	n.own = filepath.Join(n.hidden, "sessions", "s1")
	if err := os.MkdirAll(n.own, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(n.hidden, "auth.json"), n.hiddenFile} {
		if err := os.WriteFile(f, []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.p = Policy{Profile: ProfileDefault, Workspace: ws, AllowNetwork: true,
		Writable: []string{n.own}, Hidden: []string{n.hidden, n.hiddenFile},
		AllowUserNamespaces: true, Limits: Limits{MaxProcesses: 256}}
	return n
}

// TestNestedUserNamespaces: a run allowed user namespaces can make one
// (and map its ids in it, as a sandbox of its own does), and is still
// confined: it writes only the workspace, its temp dir and its Writable
// dirs, sees nothing of the hidden paths but its Writable dir beneath one,
// cannot write a sysctl (a root server's run is host uid 0) nor mount a
// proc of its own, and sees no process outside its run.
func TestNestedUserNamespaces(t *testing.T) {
	unshare := requireUnshare(t)
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) {
			s := newSandbox(t, driver)
			n := newNestedSetup(t)
			requireEnforceable(t, s, n.p)
			script := `
u=` + unshare + `
echo "uidmap: $($u -U -r cat /proc/self/uid_map | awk '{print $1, $2, $3}')"
$u -U -r -m sh -c 'mount -t tmpfs none "$1" && echo nested-mount' - "$TMPDIR"
$u -U -r -m -p -f sh -c 'mount -t proc proc /proc && echo NESTED-PROC-MOUNTED'
touch ws-file && echo wrote-workspace
touch "$OWN/state" && echo wrote-own
touch "$TMPDIR/t" && echo wrote-temp
touch "/tmp/$PRIVATE" && echo wrote-private-tmp
touch "$OUTSIDE/escaped" && echo ESCAPED-OUTSIDE
chmod 0777 /etc/passwd && echo CHMOD-ETC
echo "hidden: $(ls -A "$HIDDEN" | tr '\n' ' ')"
echo "sessions: $(ls -A "$HIDDEN/sessions" | tr '\n' ' ')"
cat "$HIDDEN/auth.json" && echo READ-HIDDEN
echo "hidden file: [$(cat "$HIDDEN_FILE")]"
cp /proc/sys/kernel/core_pattern "$TMPDIR/cp" && cat "$TMPDIR/cp" > /proc/sys/kernel/core_pattern && echo SYSCTL-WRITTEN
$u -U -r sh -c 'cat "$1" > /proc/sys/kernel/core_pattern && echo NESTED-SYSCTL-WRITTEN' - "$TMPDIR/cp"
echo h > /proc/sysrq-trigger 2>/dev/null && echo SYSRQ
echo "dev: $(ls /dev | tr '\n' ' ')"
for f in /proc/[0-9]*/cmdline; do printf 'proc %s: ' "$f"; tr '\0' ' ' < "$f"; echo; done
`
			private := "troupe-private-" + strconv.Itoa(os.Getpid())
			t.Cleanup(func() { os.Remove(filepath.Join("/tmp", private)) })
			// From a file, so that no process's command line holds the
			// markers looked for.
			if err := os.WriteFile(filepath.Join(n.ws, "probe.sh"), []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			env := append(append([]string(nil), testEnv...), "OWN="+n.own, "OUTSIDE="+n.outside, "HIDDEN="+n.hidden, "HIDDEN_FILE="+n.hiddenFile, "PRIVATE="+private)
			r := runEnv(t, s, n.p, env, "/bin/sh", "probe.sh")
			t.Logf("%s\n%s", r.stdout, r.stderr)
			out := r.stdout
			uid := strconv.Itoa(os.Getuid())
			if os.Getuid() == 0 {
				uid = strconv.Itoa(nestedUID)
			}
			for _, want := range []string{"uidmap: 0 " + uid + " 1", "nested-mount", "wrote-workspace", "wrote-own", "wrote-temp", "wrote-private-tmp",
				"hidden: sessions", "sessions: s1", "hidden file: []"} {
				if !strings.Contains(out, want) {
					t.Errorf("want %q in the run's output", want)
				}
			}
			for _, bad := range []string{"NESTED-PROC-MOUNTED", "ESCAPED-OUTSIDE", "CHMOD-ETC", "READ-HIDDEN", "secret", "SYSCTL-WRITTEN", "NESTED-SYSCTL-WRITTEN", "SYSRQ"} {
				if strings.Contains(out, bad) {
					t.Errorf("%s", bad)
				}
			}
			if _, err := os.Stat(filepath.Join(n.own, "state")); err != nil {
				t.Errorf("the Writable dir's file is not on the host: %v", err)
			}
			// The run's /tmp is its own: what it made there is not on the
			// host.
			if fileExists(filepath.Join("/tmp", private)) {
				t.Errorf("the run's /tmp entry reached the host's /tmp")
			}
			// Only the run's own processes: none of them is this test.
			for line := range strings.SplitSeq(out, "\n") {
				if strings.HasPrefix(line, "proc ") && strings.Contains(line, "-test.") {
					t.Errorf("the run sees a process outside it: %s", line)
				}
			}
		})
	}
}

// codexEnv passes codexCLI's answer to the copy of this test binary
// TestAsNonRoot runs elsewhere.
const codexEnv = "TROUPE_TEST_CODEX"

// codexCLI is the Codex CLI the e2e tests install, or "" when it is not
// installed.
func codexCLI(t *testing.T) string {
	t.Helper()
	if path, ok := os.LookupEnv(codexEnv); ok {
		return path
	}
	path, err := filepath.Abs(filepath.Join("..", "e2e", "codex", "node_modules", ".bin", "codex"))
	if err != nil {
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// TestCodexSandboxInside runs the real Codex CLI's own sandbox inside
// troupe's, as the Codex app-server's commands run: Codex's bubblewrap
// lets the command write the workspace and refuses /etc, and a command
// Codex does not sandbox (danger-full-access, what an escalation asks
// for) is still held by troupe's.
func TestCodexSandboxInside(t *testing.T) {
	codex := codexCLI(t)
	if codex == "" {
		t.Skip("the Codex CLI is not installed (cd e2e/codex && npm ci)")
	}
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) {
			s := newSandbox(t, driver)
			n := newNestedSetup(t)
			requireEnforceable(t, s, n.p)
			// Codex's own sandbox keeps .git read-only inside the
			// workspace, which troupe's does not: a refused write there
			// shows that Codex's sandbox ran.
			if err := os.Mkdir(filepath.Join(n.ws, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			etc := filepath.Join("/etc", "troupe-codex-escape-"+strconv.Itoa(os.Getpid()))
			t.Cleanup(func() { os.Remove(etc) })
			env := append(append([]string(nil), testEnv...), "CODEX_HOME="+n.own, "HOME="+n.own)
			r := runEnv(t, s, n.p, env, codex, "sandbox", "-c", `sandbox_mode="workspace-write"`,
				"--",
				"/bin/sh", "-c", `touch by-codex && echo codex-wrote-workspace; touch "$1" && echo CODEX-WROTE-ETC; touch .git/planted && echo CODEX-WROTE-GIT`, "-", etc)
			t.Logf("workspace-write: %v", r)
			if !strings.Contains(r.stdout, "codex-wrote-workspace") {
				t.Errorf("Codex's sandbox did not run the command or it could not write the workspace: %v", r)
			}
			if _, err := os.Stat(filepath.Join(n.ws, "by-codex")); err != nil {
				t.Errorf("the command's file is not in the workspace: %v", err)
			}
			if strings.Contains(r.stdout, "CODEX-WROTE-ETC") || fileExists(etc) {
				t.Errorf("Codex's sandbox let the command write /etc: %v", r)
			}
			if strings.Contains(r.stdout, "CODEX-WROTE-GIT") {
				t.Errorf("Codex's sandbox did not protect .git: did it run at all? %v", r)
			}
			r = runEnv(t, s, n.p, env, codex, "sandbox", "-c", `sandbox_mode="danger-full-access"`, "--",
				"/bin/sh", "-c", `touch "$1" && echo UNSANDBOXED-WROTE-OUTSIDE`, "-", filepath.Join(n.outside, "escaped"))
			t.Logf("danger-full-access: %v", r)
			if strings.Contains(r.stdout, "UNSANDBOXED-WROTE-OUTSIDE") || fileExists(filepath.Join(n.outside, "escaped")) {
				t.Errorf("a command Codex does not sandbox wrote outside troupe's sandbox: %v", r)
			}
		})
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestPrivateTmpWhileTmpChanges: a run allowed user namespaces gets a
// private /tmp into which the host's entries are bound back; entries
// that come and go while it starts (other programs' temp files) must not
// fail the start. Before the fix a file removed between its clone and its
// bind failed the run ("bind /tmp/... back: no such file or directory").
func TestPrivateTmpWhileTmpChanges(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	p := policy(ProfileDefault, ws)
	p.AllowNetwork = true
	p.AllowUserNamespaces = true
	requireEnforceable(t, s, p)
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for i := 0; i < 200000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := filepath.Join("/tmp", "troupe-churn-"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(i%8))
			if i%2 == 0 {
				_ = os.WriteFile(name, nil, 0o600)
			} else {
				_ = os.Mkdir(name+"-d", 0o700)
				_ = os.Remove(name)
				_ = os.Remove(name + "-d")
			}
		}
	}()
	defer func() {
		close(stop)
		<-churned
		for i := 0; i < 8; i++ {
			name := filepath.Join("/tmp", "troupe-churn-"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(i))
			os.Remove(name)
			os.Remove(name + "-d")
		}
	}()
	for i := 0; i < 60; i++ {
		if r, err := runErr(t, s, p, "/bin/true"); err != nil {
			t.Fatalf("start %d while /tmp changes: %v (%s)", i, err, r)
		}
	}
}
