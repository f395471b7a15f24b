package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWritableAndHidden: a policy's Writable dirs are writable (one
// outside everything, one beneath a hidden dir, as a session's CODEX_HOME
// lies beneath troupe's hidden Codex root), its Hidden paths are not seen
// (the rest of a hidden dir is empty, a hidden file reads as nothing),
// and everything else stays read-only, under both drivers.
func TestWritableAndHidden(t *testing.T) {
	for _, driver := range drivers(t) {
		t.Run(driver, func(t *testing.T) {
			s := newSandbox(t, driver)
			ws, outside := workspace(t)
			root := filepath.Dir(ws)
			free := filepath.Join(root, "state")
			hidden := filepath.Join(root, "codex")
			own := filepath.Join(hidden, "sessions", "s1")
			secretFile := filepath.Join(root, "secret.txt")
			for _, d := range []string{free, own} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range []string{filepath.Join(hidden, "auth.json"), filepath.Join(hidden, "sessions", "s2"), secretFile} {
				if err := os.WriteFile(f, []byte("HIDDEN-SECRET"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p := policy(ProfileDefault, ws)
			p.Writable = []string{free, own}
			p.Hidden = []string{hidden, secretFile}
			requireEnforceable(t, s, p)
			script := `
echo a > "$FREE/f" && echo wrote-free
echo b > "$OWN/f" && echo wrote-own
echo c > "$OUTSIDE/f" && echo WROTE-OUTSIDE
echo d > "$HIDDEN/f" && echo WROTE-HIDDEN
echo "hidden: $(ls -A "$HIDDEN" | tr '\n' ' ')"
echo "sessions: $(ls -A "$HIDDEN/sessions" | tr '\n' ' ')"
cat "$HIDDEN/auth.json" "$HIDDEN/sessions/s2" "$SECRET"
true`
			env := append(append([]string(nil), testEnv...), "FREE="+free, "OWN="+own, "OUTSIDE="+outside, "HIDDEN="+hidden, "SECRET="+secretFile)
			r := runEnv(t, s, p, env, sh(script)...)
			for _, want := range []string{"wrote-free", "wrote-own", "hidden: sessions \n", "sessions: s1 \n"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("want %q: %v", want, r)
				}
			}
			for _, bad := range []string{"WROTE-OUTSIDE", "WROTE-HIDDEN", "HIDDEN-SECRET", "auth.json", "s2"} {
				if strings.Contains(r.stdout, bad) {
					t.Errorf("%s: %v", bad, r)
				}
			}
			for _, f := range []string{filepath.Join(free, "f"), filepath.Join(own, "f")} {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("the run's write did not reach the host: %v", err)
				}
			}
			// Without the policy's Hidden the same run sees them: the test
			// can see the attack.
			p.Hidden = nil
			if r := runEnv(t, s, p, env, sh(script)...); !strings.Contains(r.stdout, "HIDDEN-SECRET") {
				t.Errorf("without Hidden the secrets should be readable: %v", r)
			}
		})
	}
}

// TestWritableChecked: Check refuses Writable dirs that are not clean
// absolute directories or that contain what runs must not see, and
// AllowUserNamespaces where the filesystem could not be confined.
func TestWritableChecked(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, outside := workspace(t)
	hiddenParent := filepath.Join(outside, "parent")
	hidden := filepath.Join(hiddenParent, "codex")
	if err := os.MkdirAll(hidden, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(outside, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    Policy
		want string
	}{
		{"relative", Policy{Writable: []string{"state"}}, "absolute"},
		{"unclean", Policy{Writable: []string{outside + "/../outside"}}, "absolute"},
		{"missing", Policy{Writable: []string{filepath.Join(outside, "nope")}}, "not a directory"},
		{"file", Policy{Writable: []string{file}}, "not a directory"},
		{"contains the temp dir", Policy{Writable: []string{filepath.Dir(s.tempDir)}}, "contains troupe's temp dir"},
		{"contains a hidden path", Policy{Writable: []string{hiddenParent}, Hidden: []string{hidden}}, "contains troupe's temp dir or a hidden path"},
		{"hidden in the workspace", Policy{Hidden: []string{ws + "/secret"}}, "outside the workspace"},
		{"relative hidden", Policy{Hidden: []string{"secret"}}, "absolute"},
		{"read-only and nested", Policy{ReadOnlyWorkspace: true, AllowUserNamespaces: true}, "user namespaces"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.p.Profile, c.p.Workspace = ProfileDefault, ws
			err := s.Check(c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check = %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), outside) {
				t.Errorf("names a host path: %v", err)
			}
		})
	}
	// A Writable dir beneath a hidden one is what the Codex app-server
	// needs: allowed.
	p := Policy{Profile: ProfileDefault, Workspace: ws, Writable: []string{hidden}, Hidden: []string{hiddenParent}}
	if err := s.Check(p); err != nil {
		t.Errorf("a Writable dir beneath a Hidden one: %v", err)
	}
	noMounts := &Sandbox{log: s.log, driver: s.driver, helper: s.helper, tempDir: s.tempDir, iso: s.Isolation(), helperOK: s.helperOK, probed: s.probed}
	noMounts.iso.MountNS = false
	if err := noMounts.Check(Policy{Profile: ProfileDefault, Workspace: ws, AllowUserNamespaces: true}); err == nil || !strings.Contains(err.Error(), "mount namespace") {
		t.Errorf("AllowUserNamespaces without a mount view: %v", err)
	}
}
