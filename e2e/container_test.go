package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// podman runs podman with storage of its own under dir (vfs: no overlay
// mounts to leave behind, and it works where overlayfs cannot be
// mounted), cgroupfs and a file event log (no systemd needed), and runc
// when it is installed: crun refuses hosts with hybrid cgroups, as this
// CI machine has.
func podman(t *testing.T, dir string) func(ctx context.Context, args ...string) *exec.Cmd {
	global := []string{"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file"}
	if runc, err := exec.LookPath("runc"); err == nil {
		global = append(global, "--runtime", runc)
	}
	t.Cleanup(func() {
		// Containers run with --rm; what is left is image layers, plain
		// directories under dir, which t.TempDir removes.
		_ = exec.Command("podman", append(global, "rmi", "--all", "--force")...).Run()
	})
	return func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, "podman", append(global, args...)...)
	}
}

// containerLimits are the container's RLIMIT_NOFILE and RLIMIT_NPROC.
// podman's defaults (about a million each) are above this machine's hard
// limits, which a runtime without CAP_SYS_RESOURCE cannot raise; 4096 is
// below them and enough for troupe and one sandboxed run.
var containerLimits = []string{"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}

// TestContainerImage builds the Dockerfile from scripts/release's dist/
// with podman (FROM scratch: no registry is needed), checks it runs as the
// non-root user, and speaks MCP over stdio to troupe inside it: the tools
// are listed, a file of the mounted workspace is read, and a command tool
// runs in troupe's sandbox inside the container (the sandbox needs user
// namespaces there; docs/deploy.md). Before: no Dockerfile.
func TestContainerImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed (scripts/test installs Debian's)")
	}
	if os.Geteuid() != 0 {
		// Rootless podman needs subordinate ids (/etc/subuid, uidmap) set
		// up for the user; scripts/test runs as root in CI.
		t.Skip("not root: this test runs podman rootful")
	}
	dist := releaseBuild(t)
	dir := t.TempDir()
	pm := podman(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The build context is what the Dockerfile copies: dist/ (beside it,
	// the test build's other files, which the Dockerfile does not name).
	const image = "localhost/troupe-e2e:test"
	build := pm(ctx, "build", "--quiet", "--tag", image, "--file", filepath.Join(moduleRoot, "Dockerfile"), filepath.Dir(dist))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	out, err := pm(ctx, "image", "inspect", "--format", "{{.Config.User}}", image).Output()
	if err != nil || strings.TrimSpace(string(out)) != "10001:10001" {
		t.Errorf("the image's user is %q (%v), want the non-root 10001:10001", out, err)
	}

	workspace := filepath.Join(dir, "workspace")
	if err := os.Mkdir(workspace, 0o777); err != nil {
		t.Fatal(err)
	}
	// Owned by the image's user, as an operator's bind mount would be.
	if err := os.WriteFile(filepath.Join(workspace, "hello.txt"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{workspace, filepath.Join(workspace, "hello.txt")} {
		if err := os.Chown(p, 10001, 10001); err != nil {
			t.Skipf("cannot give the workspace to the image's user (uid 10001): %v", err)
		}
	}
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte(stampConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "--rm", "--interactive", "--network", "none",
		"--volume", workspace + ":/workspace", "--volume", config + ":/etc/troupe/config.toml:ro"}, containerLimits...)
	args = append(args, image, "serve", "--workspace", "/workspace", "--config", "/etc/troupe/config.toml")
	answers, logs := stdioExchange(t, pm(ctx, args...))
	if info, _ := answers[1]["result"].(map[string]any)["serverInfo"].(map[string]any); info["version"] != releaseVersion {
		t.Errorf("serverInfo %v, want version %s", info, releaseVersion)
	}
	var names []string
	list, _ := answers[2]["result"].(map[string]any)["tools"].([]any)
	for _, tool := range list {
		names = append(names, fmt.Sprint(tool.(map[string]any)["name"]))
	}
	for _, want := range []string{"repo.readFile", "repo.listDir", "shell.exec", "stamp"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("tools/list through the container lacks %s: %v", want, names)
		}
	}
	if text := fmt.Sprint(answers[3]["result"]); !strings.Contains(text, "hello from the host") {
		t.Errorf("repo.readFile of the mounted workspace: %v", answers[3])
	}
	checkStamp(t, answers, logs)
}

// stampConfig is a command tool that runs troupe itself ("troupe version")
// under profile default, without approval: in a FROM scratch image the
// only program there is, and its output shows that the sandbox started it.
const stampConfig = `[mcp.stamp]
command = "/usr/local/bin/troupe"
args = ["version"]
description = "Prints troupe's version, from inside the sandbox."
side_effects = []
requires_approval = false
sandbox_profile = "default"
`

// stdioExchange runs cmd, a troupe serving stdio, sends it initialize,
// tools/list, repo.readFile of hello.txt and a call of the stamp tool
// (ids 1 to 4), closes stdin, and returns the answers by id and its log.
func stdioExchange(t *testing.T, cmd *exec.Cmd) (map[float64]map[string]any, string) {
	t.Helper()
	var in bytes.Buffer
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"repo.readFile","arguments":{"path":"hello.txt"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"stamp","arguments":{}}}`,
	} {
		in.WriteString(m + "\n")
	}
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	answers := map[float64]map[string]any{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			t.Fatalf("stdout line %q: %v", sc.Text(), err)
		}
		if id, ok := msg["id"].(float64); ok {
			answers[id] = msg
		}
	}
	t.Logf("troupe's log:\n%s", stderr.String())
	return answers, stderr.String()
}

// checkStamp fails t unless the stamp tool's call (id 4) ran and printed
// the release's version, and the sandbox had user and mount namespaces.
func checkStamp(t *testing.T, answers map[float64]map[string]any, logs string) {
	t.Helper()
	if text := fmt.Sprint(answers[4]["result"]); !strings.Contains(text, "troupe "+releaseVersion) || strings.Contains(text, "isError:true") {
		t.Errorf("the command tool in troupe's sandbox: %v", answers[4])
	}
	if !strings.Contains(logs, "userns, mountns") {
		t.Errorf("the sandbox has no user and mount namespaces here (docs/deploy.md says it does):\n%s", logs)
	}
}
