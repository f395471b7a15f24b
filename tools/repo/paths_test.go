package repo_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/repo"
	"troupe/workspace"
)

// TestPathConfinement names paths that try to leave the workspace in every
// way we know of, through both path-taking tools. Each must be refused
// with permission_denied (or invalid_argument for a path that is not a
// path), and no message may name a host directory or a symlink target.
func TestPathConfinement(t *testing.T) {
	base := t.TempDir()
	wsDir := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	fixture{
		"secret.txt":            "secret",
		"outdir/sub/secret.txt": "secret",
	}.write(t, outside)
	fixture{
		"file.txt":          "inside",
		"dir/sub/real.txt":  "inside too",
		"to-etc":            "->/etc",
		"to-etc-passwd":     "->/etc/passwd",
		"up":                "->../outside",
		"up-file":           "->../outside/secret.txt",
		"chain-a":           "->chain-b",
		"chain-b":           "->chain-c",
		"chain-c":           "->../outside/secret.txt",
		"chain-abs":         "->to-etc-passwd",
		"dir/sub/link":      "->" + filepath.Join(outside, "outdir"),
		"dir/sub/rel-link":  "->../../../outside/outdir",
		"dir-link":          "->dir",
		"loop-back":         "->../ws/file.txt",
		"in-link":           "->dir/sub/real.txt",
		"dir/sub/back":      "->../../file.txt",
		"dir/sub/dir-back":  "->../..",
		"dir/sub/self-loop": "->self-loop",
	}.write(t, wsDir)
	ws, err := workspace.Open(wsDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	ts := newToolSet(t, ws, repo.Options{})
	ctx := testCtx(t, 10*time.Second)

	refused := []string{
		"..",
		"../x",
		"../outside/secret.txt",
		"a/../../x",
		"dir/../../outside/secret.txt",
		"/etc/passwd",
		"/etc",
		"/",
		"/proc/self/root/etc/passwd",
		"/proc/self/root" + wsDir + "/file.txt", // inside in fact, but not by name
		"/proc/self/cwd/..",
		"/proc/self/cwd/go.mod",
		"/proc/self/fd/0",
		outside + "/secret.txt",
		wsDir + "/../outside/secret.txt",
		wsDir + "/..",
		"to-etc",
		"to-etc/passwd",
		"to-etc-passwd",
		"up",
		"up/secret.txt",
		"up-file",
		"chain-a",
		"chain-abs",
		"dir/sub/link",
		"dir/sub/link/sub/secret.txt",
		"dir/sub/rel-link/sub/secret.txt",
		"dir-link/sub/link/sub/secret.txt",
		"loop-back",
	}
	for _, p := range refused {
		for _, tool := range []string{repo.NameReadFile, repo.NameListDir} {
			err := ts.call(ctx, tool, map[string]any{"path": p}, nil)
			te := wantToolError(t, err, tools.KindPermissionDenied)
			checkNoLeak(t, te.Message, p, base, outside, "/etc")
		}
	}

	// Paths that are not paths.
	for _, p := range []string{"a\x00b", "file.txt\x00", "\x00"} {
		for _, tool := range []string{repo.NameReadFile, repo.NameListDir} {
			err := ts.call(ctx, tool, map[string]any{"path": p}, nil)
			te := wantToolError(t, err, tools.KindInvalidArgument)
			checkNoLeak(t, te.Message, p, base)
		}
	}
	// A symlink loop is not an escape, but it is refused all the same.
	err = ts.call(ctx, repo.NameReadFile, map[string]any{"path": "dir/sub/self-loop"}, nil)
	te := wantToolError(t, err, tools.KindInvalidArgument)
	checkNoLeak(t, te.Message, "dir/sub/self-loop", base)

	// What stays inside works, however it is spelled.
	reads := map[string]string{
		"file.txt":                       "inside",
		"./file.txt":                     "inside",
		"dir/../file.txt":                "inside",
		wsDir + "/file.txt":              "inside",
		wsDir + "/./dir/../file.txt":     "inside",
		"in-link":                        "inside too",
		"dir/sub/back":                   "inside",
		"dir-link/sub/real.txt":          "inside too",
		"dir/sub/dir-back/file.txt":      "inside",
		"dir/sub/dir-back/dir/sub/back":  "inside",
		"dir-link/sub/dir-back/file.txt": "inside",
	}
	for p, want := range reads {
		var r readResult
		if err := ts.call(ctx, repo.NameReadFile, map[string]any{"path": p}, &r); err != nil {
			t.Errorf("reading %q: %v", p, err)
			continue
		}
		if r.Content != want || strings.HasPrefix(r.Path, "/") || strings.Contains(r.Path, "..") {
			t.Errorf("reading %q: %+v", p, r)
		}
	}
	for _, p := range []string{"", ".", wsDir, wsDir + "/", "dir-link", "dir/sub/dir-back", "dir/sub/dir-back/dir"} {
		if err := ts.call(ctx, repo.NameListDir, map[string]any{"path": p}, nil); err != nil {
			t.Errorf("listing %q: %v", p, err)
		}
	}
}

// checkNoLeak fails if msg names a host path the client did not send.
func checkNoLeak(t *testing.T, msg, arg string, hostPaths ...string) {
	t.Helper()
	for _, h := range hostPaths {
		if strings.Contains(arg, h) {
			continue // echoing the client's own path is fine
		}
		if strings.Contains(msg, h) {
			t.Errorf("path %q: message %q reveals %q", arg, msg, h)
		}
	}
}
