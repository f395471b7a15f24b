package config

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"troupe/sandbox"
)

// places is a workspace, a directory outside it, and a sandbox temp dir
// for one test, every path with its symlinks resolved.
type places struct {
	ws, outside, runTemp string
}

func newPlaces(t *testing.T) places {
	t.Helper()
	p := places{ws: t.TempDir(), outside: t.TempDir(), runTemp: t.TempDir()}
	for _, d := range []*string{&p.ws, &p.outside, &p.runTemp} {
		real, err := filepath.EvalSymlinks(*d)
		if err != nil {
			t.Fatal(err)
		}
		*d = real
	}
	return p
}

func (p places) writable() RunWritable { return RunWritable{Workspace: p.ws, RunTempDir: p.runTemp} }

// safe is a configuration whose own files are all outside the workspace.
func (p places) safe(t *testing.T) *Config {
	t.Helper()
	file := placeConfig(t, filepath.Join(p.outside, "config.toml"))
	spool := filepath.Join(p.outside, "spool")
	if err := os.Mkdir(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	return &Config{File: file, Audit: Audit{Enabled: true, Path: filepath.Join(p.outside, "state", "audit.jsonl")},
		Output: Output{SpoolDir: spool}}
}

func placeConfig(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("[server]\nname = \"placed\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

func TestCheckOwnFilesAcceptsFilesOutside(t *testing.T) {
	p := newPlaces(t)
	cfg := p.safe(t)
	if err := CheckOwnFiles(cfg, p.writable()); err != nil {
		t.Fatal(err)
	}
	// A config file reached through a symlink that lies outside too.
	file := cfg.File
	cfg.File = symlink(t, file, filepath.Join(p.outside, "link.toml"))
	if err := CheckOwnFiles(cfg, p.writable()); err != nil {
		t.Fatal(err)
	}
	// No config file at all (defaults, environment and -c only).
	cfg.File = ""
	if err := CheckOwnFiles(cfg, p.writable()); err != nil {
		t.Fatal(err)
	}
	// The audit log off: its path does not matter.
	cfg.Audit = Audit{Enabled: false, Path: filepath.Join(p.ws, "audit.jsonl")}
	if err := CheckOwnFiles(cfg, p.writable()); err != nil {
		t.Fatal(err)
	}
	// The sandbox temp dir itself, and what is in it but not a run's dir,
	// runs cannot write.
	cfg.Output.SpoolDir = p.runTemp
	if err := CheckOwnFiles(cfg, p.writable()); err != nil {
		t.Fatal(err)
	}
}

// TestCheckOwnFilesRefusesRunWritablePlaces puts each of troupe's own
// files where a run may write, directly or through symlinks, and expects a
// *PlaceError naming the key, the path and the fix.
func TestCheckOwnFilesRefusesRunWritablePlaces(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T, p places, cfg *Config, w *RunWritable)
		what    string
		mention []string
	}{
		{"config file in the workspace", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			cfg.File = placeConfig(t, filepath.Join(p.ws, ".troupe", "config.toml"))
		}, "config file", []string{"inside the workspace", "move the config file outside the workspace or choose another workspace"}},
		{"config file symlinked into the workspace", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			target := placeConfig(t, filepath.Join(p.ws, "config.toml"))
			cfg.File = symlink(t, target, filepath.Join(p.outside, "link.toml"))
		}, "config file", []string{"(resolved: " + filepath.Join("WS", "config.toml") + ")", "inside the workspace", "move the config file"}},
		{"config symlink in the workspace (its directory is)", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			target := placeConfig(t, filepath.Join(p.outside, "real.toml"))
			cfg.File = symlink(t, target, filepath.Join(p.ws, "link.toml"))
		}, "config file", []string{"reached through the symlink " + filepath.Join("WS", "link.toml"), "may replace it", "move the config file"}},
		{"config in a directory symlinked from the workspace", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			placeConfig(t, filepath.Join(p.outside, "etc", "config.toml"))
			symlink(t, filepath.Join(p.outside, "etc"), filepath.Join(p.ws, "etc"))
			cfg.File = filepath.Join(p.ws, "etc", "config.toml")
		}, "config file", []string{"reached through the symlink " + filepath.Join("WS", "etc"), "move the config file"}},
		{"workspace given through a symlink", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			cfg.File = placeConfig(t, filepath.Join(p.ws, "config.toml"))
			w.Workspace = symlink(t, p.ws, filepath.Join(p.outside, "ws-link"))
		}, "config file", []string{"inside the workspace WS"}},
		{"config file hard-linked", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			if err := os.Link(cfg.File, filepath.Join(p.ws, "config.toml")); err != nil {
				t.Skipf("hard link across temp dirs: %v", err)
			}
		}, "config file", []string{"has 2 hard links", "copy it instead of linking it"}},
		{"audit.path in the workspace", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			cfg.Audit.Path = filepath.Join(p.ws, "logs", "audit.jsonl") // neither exists yet
		}, "audit.path", []string{"inside the workspace", "truncate or rewrite the log", "set audit.path outside the workspace"}},
		{"audit.path a dangling symlink into the workspace", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			// Opening the log would create the symlink's target.
			cfg.Audit.Path = symlink(t, filepath.Join(p.ws, "audit.jsonl"), filepath.Join(p.outside, "audit.jsonl"))
		}, "audit.path", []string{"(resolved: " + filepath.Join("WS", "audit.jsonl") + ")", "inside the workspace"}},
		{"default audit log in the workspace", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			t.Setenv("XDG_STATE_HOME", filepath.Join(p.ws, "state"))
			cfg.Audit.Path = ""
		}, "audit log (the default for audit.path)", []string{filepath.Join("WS", "state", "troupe", "audit.jsonl"), "set audit.path outside the workspace"}},
		{"spool dir in the workspace", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			cfg.Output.SpoolDir = p.ws
		}, "output.spool_dir", []string{"inside the workspace", "set output.spool_dir outside the workspace"}},
		{"spool dir the temp dir, inside the workspace", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			t.Setenv("TMPDIR", p.ws)
			cfg.Output.SpoolDir = ""
			w.RunTempDir = ""
		}, `output.spool_dir ("": the system temp directory)`, []string{"inside the workspace"}},
		{"spool dir in a run's temp dir", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			cfg.Output.SpoolDir = filepath.Join(sandbox.TempRoot(p.runTemp), "run-123", "spool")
		}, "output.spool_dir", []string{"inside troupe's temp root " + sandbox.TempRoot("RUNTEMP")}},
		{"spool dir missing", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			cfg.Output.SpoolDir = filepath.Join(p.outside, "missing")
		}, "output.spool_dir", []string{filepath.Join("OUT", "missing") + " does not exist", "create it, or set output.spool_dir"}},
		{"spool dir a file", func(t *testing.T, p places, cfg *Config, w *RunWritable) {
			cfg.Output.SpoolDir = cfg.File
		}, "output.spool_dir", []string{filepath.Join("OUT", "config.toml") + " is not a directory", "set output.spool_dir to an existing, writable directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPlaces(t)
			cfg, w := p.safe(t), p.writable()
			c.setup(t, p, cfg, &w)
			err := CheckOwnFiles(cfg, w)
			var pe *PlaceError
			if !errors.As(err, &pe) {
				t.Fatalf("want a *PlaceError, got %v", err)
			}
			if pe.What != c.what {
				t.Errorf("What = %q, want %q", pe.What, c.what)
			}
			text := err.Error()
			for _, m := range c.mention {
				m = strings.NewReplacer("WS", p.ws, "OUT", p.outside, "RUNTEMP", p.runTemp).Replace(m)
				if !strings.Contains(text, m) {
					t.Errorf("error does not mention %q:\n%s", m, text)
				}
			}
		})
	}
}

// TestCheckOwnFilesReportsEveryProblem: one start tells about all of them.
func TestCheckOwnFilesReportsEveryProblem(t *testing.T) {
	p := newPlaces(t)
	cfg := &Config{File: placeConfig(t, filepath.Join(p.ws, "c.toml")),
		Audit:  Audit{Enabled: true, Path: filepath.Join(p.ws, "a.jsonl")},
		Output: Output{SpoolDir: filepath.Join(p.outside, "nope")}}
	err := CheckOwnFiles(cfg, p.writable())
	var whats []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		whats = append(whats, e.(*PlaceError).What)
	}
	if strings.Join(whats, ",") != "config file,audit.path,output.spool_dir" {
		t.Fatalf("problems: %v\n%v", whats, err)
	}
}

// TestSpoolDirNotWritable: a directory troupe cannot create files in is
// refused. Root writes a 0500 directory, so as root the test re-runs
// itself as nobody.
func TestSpoolDirNotWritable(t *testing.T) {
	if os.Getuid() == 0 {
		asNobody(t, "TestSpoolDirNotWritable")
		return
	}
	p := newPlaces(t)
	spool := filepath.Join(p.outside, "read-only")
	if err := os.Mkdir(spool, 0o500); err != nil {
		t.Fatal(err)
	}
	err := CheckOwnFiles(&Config{Output: Output{SpoolDir: spool}}, p.writable())
	if err == nil || !strings.Contains(err.Error(), "output.spool_dir "+spool+" is not writable (permission denied)") {
		t.Fatalf("got %v", err)
	}
}

// asNobody runs the test named test in a copy of this test binary as uid
// 65534, and fails if it fails or is skipped there.
func asNobody(t *testing.T, test string) {
	t.Helper()
	const nobody = 65534
	dir, err := os.MkdirTemp("", "troupe-config-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "config.test")
	if err := copyExecutable(exe, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp", "HOME=/nonexistent", "GORACE=atexit_sleep_ms=0"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

func copyExecutable(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestWatcherRefusesRunWritableConfig: the watcher will not watch a config
// file a run could write, even if serve's start check were skipped.
func TestWatcherRefusesRunWritableConfig(t *testing.T) {
	p := newPlaces(t)
	file := placeConfig(t, filepath.Join(p.ws, "config.toml"))
	opts := Options{File: file, Environ: []string{}}
	cfg, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan string, 8)
	w := NewWatcher(cfg, opts, p.writable(), 10*time.Millisecond,
		func(c *Config) { applied <- c.Server.Name }, func(error) {})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "inside the workspace") {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		// Still watching: show what a run's write does, then fail.
		placeConfig(t, file)
		w.Reload()
		select {
		case name := <-applied:
			t.Fatalf("the watcher watches a file runs may write, and applied what was written there (%s)", name)
		case <-time.After(time.Second):
			t.Fatal("the watcher watches a file runs may write")
		}
	}
}

// TestWatcherDoesNotApplyRunWritableConfig: a config file swapped, after
// start, for a symlink into the workspace is never applied, whether the
// swap's event or a SIGHUP asks for the reload.
func TestWatcherDoesNotApplyRunWritableConfig(t *testing.T) {
	p := newPlaces(t)
	file := placeConfig(t, filepath.Join(p.outside, "config.toml"))
	opts := Options{File: file, Environ: []string{}}
	cfg, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	applied, failed := make(chan string, 8), make(chan error, 8)
	w := NewWatcher(cfg, opts, p.writable(), 10*time.Millisecond,
		func(c *Config) { applied <- c.Server.Name }, func(err error) { failed <- err })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// A reload is served only once the watch is in place.
	w.Reload()
	select {
	case name := <-applied:
		if name != "placed" {
			t.Fatalf("applied %q", name)
		}
	case err := <-failed:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("a config file outside the workspace was not reloaded")
	}
	target := filepath.Join(p.ws, "planted.toml")
	if err := os.WriteFile(target, []byte("[server]\nname = \"planted\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := symlink(t, target, filepath.Join(p.outside, ".config.toml.new"))
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case name := <-applied:
			t.Fatalf("applied a config file that lies in the workspace (%s)", name)
		case err := <-failed:
			if !strings.Contains(err.Error(), "not reloading") || !strings.Contains(err.Error(), target) {
				t.Fatalf("reload error: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the reload was neither applied nor refused")
		}
		w.Reload() // SIGHUP
	}
}

// TestOwnPathsHideRotatedAuditFiles: runs must not read the rotated audit
// files either: those rotation will make (PATH.1 … PATH.max_files) and
// those an earlier, larger max_files left.
func TestOwnPathsHideRotatedAuditFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	os.WriteFile(filepath.Join(dir, "audit.jsonl.7"), nil, 0o600)
	cfg := &Config{Audit: Audit{Enabled: true, Path: path, MaxBytes: 1 << 20, MaxFiles: 3}}
	want := []string{path, path + ".1", path + ".2", path + ".3", path + ".7"}
	if got := cfg.OwnPaths(); !slices.Equal(got, want) {
		t.Fatalf("OwnPaths = %q, want %q", got, want)
	}
	cfg.Audit.MaxBytes = 0 // no rotation: only what is there
	if got := cfg.OwnPaths(); !slices.Equal(got, []string{path, path + ".7"}) {
		t.Fatalf("OwnPaths without rotation = %q", got)
	}
}

// TestClusterNodeAuditFileIsNamedByNode: a cluster node's audit log is a
// file of its own, named by the address other nodes dial it at (advertise,
// else listen), so two nodes sharing audit.path write two files, and one
// process writes audit.path itself. Runs are kept away from the node's
// file, not from the one it does not write.
func TestClusterNodeAuditFileIsNamedByNode(t *testing.T) {
	for _, c := range []struct{ path, addr, want string }{
		{"/var/log/troupe/audit.jsonl", "127.0.0.1:7001", "/var/log/troupe/audit.127.0.0.1_7001.jsonl"},
		{"/var/log/troupe/audit", "node-a.internal:7001", "/var/log/troupe/audit.node-a.internal_7001"},
		{"/logs/a.b.jsonl", "[::1]:7001", "/logs/a.b.__1_7001.jsonl"},
		{"/logs/.jsonl", "10.0.0.2:9", "/logs/.jsonl.10.0.0.2_9"},
		{"audit.jsonl", "h/../x:1", "audit.h_.._x_1.jsonl"},
	} {
		if got := NodeAuditFile(c.path, c.addr); got != c.want {
			t.Errorf("NodeAuditFile(%q, %q) = %q, want %q", c.path, c.addr, got, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := &Config{Audit: Audit{Enabled: true, Path: path}}
	if got, _ := cfg.AuditFile(); got != path {
		t.Fatalf("one process: AuditFile = %q, want audit.path %q", got, path)
	}
	cfg.Cluster = Cluster{Provider: "etcd", Listen: "127.0.0.1:7001"}
	want := filepath.Join(filepath.Dir(path), "audit.127.0.0.1_7001.jsonl")
	if got, _ := cfg.AuditFile(); got != want {
		t.Fatalf("a node listening on 127.0.0.1:7001: AuditFile = %q, want %q", got, want)
	}
	if got := cfg.OwnPaths(); !slices.Contains(got, want) || slices.Contains(got, path) {
		t.Fatalf("a node's OwnPaths = %q: want its own log %q hidden", got, want)
	}
	cfg.Cluster.Listen, cfg.Cluster.Advertise = "0.0.0.0:7001", "10.1.2.3:7001"
	want = filepath.Join(filepath.Dir(path), "audit.10.1.2.3_7001.jsonl")
	if got, _ := cfg.AuditFile(); got != want {
		t.Fatalf("a node advertising 10.1.2.3:7001: AuditFile = %q, want %q", got, want)
	}
}
