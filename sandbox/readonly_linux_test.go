package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// readOnly is the policy of a read-only run in ws.
func readOnly(ws string) Policy {
	return Policy{Profile: ProfileDefault, Workspace: ws, ReadOnlyWorkspace: true}
}

// TestReadOnlyWorkspace: a read-only run reads the workspace and nothing
// else, through whatever path, and writes nothing.
func TestReadOnlyWorkspace(t *testing.T) {
	testReadOnlyWorkspace(t, DriverBuiltin)
}

func TestBwrapReadOnlyWorkspace(t *testing.T) {
	requireBwrap(t)
	testReadOnlyWorkspace(t, DriverBwrap)
}

func testReadOnlyWorkspace(t *testing.T, driver string) {
	s := newSandbox(t, driver)
	ws, outside := workspace(t)
	requireEnforceable(t, s, readOnly(ws))
	const secret = "SECRET-outside-the-workspace"
	mustWrite(t, filepath.Join(outside, "secret.txt"), secret+"\n")
	mustWrite(t, filepath.Join(ws, "inside.txt"), "inside\n")
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "file-link")); err != nil {
		t.Fatal(err)
	}
	cat := lookPath(t, "cat")

	t.Run("reads the workspace", func(t *testing.T) {
		r := runIn(t, s, readOnly(ws), cat, filepath.Join(ws, "inside.txt"), "inside.txt")
		if r.err != nil || r.stdout != "inside\ninside\n" {
			t.Fatalf("%v", r)
		}
		ls := lookPath(t, "ls")
		r = runIn(t, s, readOnly(ws), ls, "-a", ".")
		if r.err != nil || !containsLine(r.stdout, "inside.txt") {
			t.Fatalf("ls: %v", r)
		}
	})
	for _, path := range []string{
		filepath.Join(outside, "secret.txt"),
		filepath.Join(ws, "link", "secret.txt"),
		"link/secret.txt",
		"file-link",
		"/etc/passwd",
	} {
		t.Run("denies "+path, func(t *testing.T) {
			// The same run without ReadOnlyWorkspace reads it: the test
			// can fail.
			if path != "/etc/passwd" {
				r := runIn(t, s, Policy{Profile: ProfileDefault, Workspace: ws}, cat, path)
				if !strings.Contains(r.stdout, secret) {
					t.Fatalf("the default profile does not read %s, so this test proves nothing: %v", path, r)
				}
			}
			r := runIn(t, s, readOnly(ws), cat, path)
			if r.err == nil || strings.Contains(r.stdout, secret) || strings.Contains(r.stdout, "root:") {
				t.Fatalf("read escaped: %v", r)
			}
			if !strings.Contains(r.stderr, "Permission denied") {
				t.Errorf("stderr does not say why: %q", r.stderr)
			}
		})
	}
	t.Run("lists nothing outside", func(t *testing.T) {
		r := runIn(t, s, readOnly(ws), lookPath(t, "ls"), outside, "link/")
		if r.err == nil || strings.Contains(r.stdout, "secret.txt") {
			t.Fatalf("listing escaped: %v", r)
		}
	})
	t.Run("writes nothing", func(t *testing.T) {
		sh := lookPath(t, "sh")
		for _, target := range []string{filepath.Join(ws, "new.txt"), filepath.Join(ws, "inside.txt"), "$TMPDIR/t", filepath.Join(outside, "new.txt"), "/dev/zero"} {
			r := runIn(t, s, readOnly(ws), sh, "-c", fmt.Sprintf(`echo x > %s`, target))
			if r.err == nil {
				t.Errorf("write to %s succeeded: %v", target, r)
			}
		}
		if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
			t.Error("a file was created in the workspace")
		}
		if data, _ := os.ReadFile(filepath.Join(ws, "inside.txt")); string(data) != "inside\n" {
			t.Errorf("inside.txt changed to %q", data)
		}
		// /dev/null is the one exception: it holds nothing.
		if r := runIn(t, s, readOnly(ws), sh, "-c", "echo x > /dev/null; read y < /dev/null || echo eof"); r.err != nil || r.stdout != "eof\n" {
			t.Errorf("/dev/null: %v", r)
		}
	})
	t.Run("executes nothing else", func(t *testing.T) {
		// sh's own files are allowed; cat, which sh would exec, is not.
		r := runIn(t, s, readOnly(ws), lookPath(t, "sh"), "-c", cat+" inside.txt")
		if r.err == nil || strings.Contains(r.stdout, "inside") {
			t.Fatalf("exec of another program succeeded: %v", r)
		}
	})
}

// TestReadOnlyRefusals: the policies a read-only run cannot have are
// refused by Check, and so by Start, before anything runs.
func TestReadOnlyRefusals(t *testing.T) {
	for _, driver := range []string{DriverBuiltin, DriverBwrap} {
		s := newSandbox(t, driver)
		ws, _ := workspace(t)
		none := readOnly(ws)
		none.Profile = ProfileNone
		network := readOnly(ws)
		network.AllowNetwork = true
		for name, p := range map[string]Policy{"profile none": none, "network": network} {
			err := s.Check(p)
			var ue *UnenforceableError
			if !errors.As(err, &ue) {
				t.Errorf("%s, %s: Check = %v, want an UnenforceableError", driver, name, err)
			}
			cmd := exec.Command("/bin/true")
			if _, err := s.Start(p, cmd); err == nil {
				t.Errorf("%s, %s: Start succeeded", driver, name)
			}
		}
		// Without Landlock neither driver can hold a read-only run: bwrap
		// alone would still show the whole filesystem.
		s.iso.LandlockABI = 0
		err := s.Check(readOnly(ws))
		if err == nil || !strings.Contains(err.Error(), "Landlock") {
			t.Errorf("%s without Landlock: Check = %v, want a refusal naming Landlock", driver, err)
		}
	}
}

// TestReadOnlyStartErrors: a read-only run of a missing program fails
// like any exec (ENOENT), and one whose files cannot be worked out fails
// with a client-safe message.
func TestReadOnlyStartErrors(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	requireEnforceable(t, s, readOnly(ws))
	_, err := runErr(t, s, readOnly(ws), filepath.Join(ws, "missing"))
	var se *StartError
	if !errors.As(err, &se) || se.Stage != "exec" || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing program: %v, want an exec ENOENT", err)
	}
	script := filepath.Join(ws, "script")
	mustWrite(t, script, "#!relative/interpreter\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = runErr(t, s, readOnly(ws), script)
	if !errors.As(err, &se) || se.Stage != "runtime" || strings.Contains(err.Error(), ws) {
		t.Fatalf("relative interpreter: %v, want a runtime error without host paths", err)
	}
}

// TestProgramFiles checks the files found for real programs against what
// the system's loader maps (ldd), and the cases without a loader.
func TestProgramFiles(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	for _, name := range []string{"rg", "ls", "sh", "cat"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			files, err := s.programFiles(path)
			if err != nil {
				t.Fatal(err)
			}
			real, _ := filepath.EvalSymlinks(path)
			if len(files) == 0 || files[0] != real {
				t.Fatalf("files %v do not start with the program %s", files, real)
			}
			for _, f := range files {
				if r, err := filepath.EvalSymlinks(f); err != nil || r != f {
					t.Errorf("%s is not a resolved path (%s, %v)", f, r, err)
				}
			}
			for _, lib := range lddFiles(t, path) {
				if !slices.Contains(files, lib) {
					t.Errorf("ldd maps %s, programFiles missed it: %v", lib, files)
				}
			}
			again, err := s.programFiles(path)
			if err != nil || !slices.Equal(again, files) {
				t.Errorf("second answer %v (%v) differs from %v", again, err, files)
			}
		})
	}
	t.Run("static", func(t *testing.T) {
		// The dynamic loader is itself a static executable.
		interp := interpreterOf(t, lookPath(t, "sh"))
		files, err := s.programFiles(interp)
		real, _ := filepath.EvalSymlinks(interp)
		if err != nil || !slices.Equal(files, []string{real}) {
			t.Fatalf("programFiles(%s) = %v, %v; want just itself", interp, files, err)
		}
	})
	t.Run("script and cache", func(t *testing.T) {
		dir := t.TempDir()
		prog := filepath.Join(dir, "prog")
		cat := lookPath(t, "cat")
		data, err := os.ReadFile(cat)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, prog, string(data))
		files, err := s.programFiles(prog)
		if err != nil || len(files) < 2 {
			t.Fatalf("copy of cat: %v, %v", files, err)
		}
		// Replaced by a script (a new file: new inode), the program needs
		// the shell: the cached answer must not be used.
		sh := lookPath(t, "sh")
		tmp := prog + ".new"
		mustWrite(t, tmp, "#!"+sh+" -e\necho hi\n")
		if err := os.Rename(tmp, prog); err != nil {
			t.Fatal(err)
		}
		files, err = s.programFiles(prog)
		realSh, _ := filepath.EvalSymlinks(sh)
		if err != nil || len(files) < 3 || files[0] != prog || files[1] != realSh {
			t.Fatalf("script: %v, %v; want the script, then %s and its libraries", files, err, realSh)
		}
	})
	t.Run("errors", func(t *testing.T) {
		dir := t.TempDir()
		text := filepath.Join(dir, "text")
		mustWrite(t, text, "just text\n")
		loop := filepath.Join(dir, "loop")
		mustWrite(t, loop, "#!"+loop+"\n")
		long := filepath.Join(dir, "long")
		mustWrite(t, long, "#!/"+strings.Repeat("x", 300)+"\n")
		for path, want := range map[string]error{
			filepath.Join(dir, "missing"): syscall.ENOENT,
			text:                          syscall.ENOEXEC,
			dir:                           syscall.EACCES,
			loop:                          nil,
			long:                          nil,
		} {
			_, err := s.programFiles(path)
			if err == nil || (want != nil && !errors.Is(err, want)) {
				t.Errorf("%s: err = %v, want %v", filepath.Base(path), err, want)
			}
		}
		if _, err := s.programFiles("relative"); err == nil {
			t.Error("a relative path was accepted")
		}
	})
}

// lddFiles lists the files ldd says path maps, resolved; nil when ldd is
// not there.
func lddFiles(t *testing.T, path string) []string {
	t.Helper()
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		return nil
	}
	out, err := exec.Command(ldd, path).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", path, err)
	}
	var files []string
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		var p string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			p = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			p = f[0]
		default:
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, real)
	}
	return files
}

func interpreterOf(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("readelf", "-l", path).Output()
	if err != nil {
		t.Skipf("readelf: %v", err)
	}
	_, rest, ok := bytes.Cut(out, []byte("[Requesting program interpreter: "))
	if !ok {
		t.Skipf("%s has no interpreter", path)
	}
	interp, _, _ := bytes.Cut(rest, []byte("]"))
	return string(interp)
}

func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found", name)
	}
	return p
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkReadOnlyStart measures one run, Start to Release, of a small
// program and of rg, under the default profile and read-only: the
// difference is what working out the runtime files and the narrower
// ruleset cost.
func BenchmarkReadOnlyStart(b *testing.B) {
	ws, _ := workspace(b)
	mustWrite(b, filepath.Join(ws, "a.txt"), "needle\n")
	s := newSandbox(b, DriverBuiltin)
	for _, prog := range [][]string{{"true"}, {"rg", "--no-config", "needle", "."}} {
		path, err := exec.LookPath(prog[0])
		if err != nil {
			continue
		}
		for _, c := range []struct {
			name string
			p    Policy
		}{
			{"default", Policy{Profile: ProfileDefault, Workspace: ws}},
			{"read-only", readOnly(ws)},
		} {
			b.Run(prog[0]+"/"+c.name, func(b *testing.B) {
				if err := s.Check(c.p); err != nil {
					b.Skip(err)
				}
				for b.Loop() {
					cmd := exec.Command(path, prog[1:]...)
					cmd.Dir = ws
					proc, err := s.Start(c.p, cmd)
					if err != nil {
						b.Fatal(err)
					}
					if err := cmd.Wait(); err != nil {
						b.Fatal(err)
					}
					if err := proc.Release(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
