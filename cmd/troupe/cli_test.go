package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"troupe/audit"
)

// buildTroupe builds the real troupe binary into a temp dir.
func buildTroupe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "troupe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runTroupe runs bin with args in a clean environment (HOME and
// XDG_STATE_HOME in dir, so no user config or log is found) plus env,
// and returns the exit code, stdout and stderr.
func runTroupe(t *testing.T, bin, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"),
		"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "home", ".config")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("troupe %v: %v", args, err)
	}
	return 0, stdout.String(), stderr.String()
}

func writeAuditLog(t *testing.T, path string, tools ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(path, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if _, err := l.Append(audit.Record{Event: audit.EventCall, Tool: tool, Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAuditVerifyChecksTheConfiguredLog: with audit.path set (config
// file, -c, TROUPE_AUDIT__PATH), "troupe audit verify" checks that file,
// and finds a broken chain there. Before, it checked the default file
// (intact) and said "chain intact", and --config was not a flag.
func TestAuditVerifyChecksTheConfiguredLog(t *testing.T) {
	bin := buildTroupe(t)
	dir := t.TempDir()
	// An intact log at the default place, which must not be the one checked.
	writeAuditLog(t, filepath.Join(dir, "state", "troupe", "audit.jsonl"), "a", "b")
	elsewhere := filepath.Join(dir, "logs", "audit.jsonl")
	writeAuditLog(t, elsewhere, "a", "b", "c")
	cfgFile := filepath.Join(dir, "troupe.toml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf("[audit]\npath = %q\n", elsewhere)), 0o600); err != nil {
		t.Fatal(err)
	}
	intact := elsewhere + ": 3 records, chain intact\n"
	ways := []struct {
		name string
		env  []string
		args []string
	}{
		{"--config", nil, []string{"--config", cfgFile}},
		{"-c", nil, []string{"-c", fmt.Sprintf("audit.path=%q", elsewhere)}},
		{"TROUPE_AUDIT__PATH", []string{"TROUPE_AUDIT__PATH=" + elsewhere}, nil},
		{"TROUPE_CONFIG", []string{"TROUPE_CONFIG=" + cfgFile}, nil},
	}
	for _, w := range ways {
		code, out, errText := runTroupe(t, bin, dir, w.env, append([]string{"audit", "verify"}, w.args...)...)
		if code != 0 || out != intact {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 0 and %q", w.name, code, out, errText, intact)
		}
	}

	// Break the configured log's chain: each way must find it.
	data, err := os.ReadFile(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(elsewhere, bytes.Replace(data, []byte(`"tool":"b"`), []byte(`"tool":"x"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, w := range ways {
		code, out, errText := runTroupe(t, bin, dir, w.env, append([]string{"audit", "verify"}, w.args...)...)
		if code != 1 || out != "" || !strings.Contains(errText, elsewhere+": line 2: hash mismatch") {
			t.Errorf("%s, broken chain: exit %d, stdout %q, stderr %q; want 1 naming line 2 of %s", w.name, code, out, errText, elsewhere)
		}
	}

	// A configuration troupe refuses is a usage error, not a check of
	// some other file.
	if code, _, errText := runTroupe(t, bin, dir, nil, "audit", "verify", "-c", "audit.nope=1"); code != 2 || !strings.Contains(errText, "nope") {
		t.Errorf("bad config: exit %d, stderr %q; want 2 naming the key", code, errText)
	}
}

// TestConfigCheckRefusesWhatServeRefuses: "config check" runs serve's
// checks before serving. Before, it passed [mcp."repo.readFile"] (exit 0)
// while serve refused it, and never looked at [mcp_servers] commands.
func TestConfigCheckRefusesWhatServeRefuses(t *testing.T) {
	bin := buildTroupe(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shadow := write("shadow.toml", "[mcp.\"repo.readFile\"]\ncommand = \"cat\"\nargs = [\"README\"]\n")
	ghost := write("ghost.toml", "[mcp_servers.ghost]\ncommand = \"troupe-test-no-such-command\"\n")
	good := write("good.toml", "[server]\nname = \"checked\"\n")

	code, out, errText := runTroupe(t, bin, dir, nil, "config", "check", "--config", shadow, "--workspace", ws)
	if code != 2 || out != "" || !strings.Contains(errText, "repo.readFile") {
		t.Errorf("config check, duplicate name: exit %d, stdout %q, stderr %q; want 2 naming repo.readFile", code, out, errText)
	}
	// serve refuses the same config with the same code.
	code, _, errText = runTroupe(t, bin, dir, nil, "serve", "--config", shadow, "--workspace", ws)
	if code != 2 || !strings.Contains(errText, "repo.readFile") {
		t.Errorf("serve, duplicate name: exit %d, stderr %q; want 2", code, errText)
	}

	code, out, errText = runTroupe(t, bin, dir, nil, "config", "check", "--config", ghost, "--workspace", ws)
	if code != 2 || out != "" || !strings.Contains(errText, `[mcp_servers."ghost"]`) || !strings.Contains(errText, "troupe-test-no-such-command") {
		t.Errorf("config check, bad downstream: exit %d, stdout %q, stderr %q; want 2 naming the server and command", code, out, errText)
	}
	// Disabled, it is not checked (serve does not start it either).
	code, _, errText = runTroupe(t, bin, dir, nil, "config", "check", "--config", ghost, "--workspace", ws, "-c", "mcp_servers.ghost.enabled=false")
	if code != 0 {
		t.Errorf("config check, disabled server: exit %d, stderr %q; want 0", code, errText)
	}

	code, out, errText = runTroupe(t, bin, dir, nil, "config", "check", "--config", good, "--workspace", ws)
	if code != 0 || !strings.Contains(out, "name = 'checked'") {
		t.Errorf("config check, good config: exit %d, stdout %q, stderr %q", code, out, errText)
	}
	code, _, errText = runTroupe(t, bin, dir, nil, "config", "check", "--config", good, "--workspace", filepath.Join(dir, "missing"))
	if code != 2 || !strings.Contains(errText, "cannot open the workspace") {
		t.Errorf("config check, missing workspace: exit %d, stderr %q; want 2", code, errText)
	}
}

// TestToolsShowsCodexNames: "troupe tools" shows the names the Codex
// model sees. The expected names are what the real Codex 0.169 showed
// (../shared/notes/codex-client.md). Before, colliding and over-long
// names were shown without Codex's hash suffix.
func TestToolsShowsCodexNames(t *testing.T) {
	bin := buildTroupe(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("l", 128)
	cfg := filepath.Join(dir, "troupe.toml")
	body := fmt.Sprintf("[server]\nname = \"fx\"\n[mcp.\"dup.x\"]\ncommand = \"true\"\n[mcp.dup_x]\ncommand = \"true\"\n[mcp.%s]\ncommand = \"true\"\n", long)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errText := runTroupe(t, bin, dir, nil, "tools", "--config", cfg, "--workspace", ws)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errText)
	}
	for _, want := range []string{
		"dup.x\n  codex name:  mcp__fx / dup_x_52ac6dfba137\n",
		"dup_x\n  codex name:  mcp__fx / dup_x_69e938530463\n",
		"repo.readFile\n  codex name:  mcp__fx / repo_readFile\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// "mcp__fx__" and the tool name stay within 128 characters: 119 for the tool.
	m := regexp.MustCompile(long + `\n  codex name:  mcp__fx / (l{106}_[0-9a-f]{12})\n`).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("the 128-character name is not shown cut and suffixed:\n%s", out)
	}
	code, out, _ = runTroupe(t, bin, dir, nil, "tools", "--json", "--config", cfg, "--workspace", ws)
	if code != 0 || !strings.Contains(out, `"dup.x": "dup_x_52ac6dfba137"`) || !strings.Contains(out, `"namespace": "mcp__fx"`) {
		t.Errorf("--json: exit %d, lacks the Codex names:\n%s", code, out)
	}
}

// TestCodexConfig: --http with --bearer-token-env names the variable in
// the block (before: "flag provided but not defined"), and a troupe run
// from the Go build cache (as "go run" makes it) is warned about.
func TestCodexConfig(t *testing.T) {
	bin := buildTroupe(t)
	dir := t.TempDir()
	code, out, errText := runTroupe(t, bin, dir, []string{"MY_TROUPE_TOKEN=x"}, "codex-config", "--http", "http://127.0.0.1:8080/mcp", "--bearer-token-env", "MY_TROUPE_TOKEN")
	want := "[mcp_servers.troupe]\nurl = \"http://127.0.0.1:8080/mcp\"\nbearer_token_env_var = \"MY_TROUPE_TOKEN\"\n"
	if code != 0 || out != want || errText != "" {
		t.Errorf("--http --bearer-token-env: exit %d, stdout %q, stderr %q; want %q", code, out, errText, want)
	}
	for _, args := range [][]string{
		{"codex-config", "--bearer-token-env", "MY_TROUPE_TOKEN"},
		{"codex-config", "--http", "http://127.0.0.1:8080/mcp", "--bearer-token-env", "not a name"},
		{"codex-config", "--http", "127.0.0.1:8080"},
	} {
		if code, out, _ := runTroupe(t, bin, dir, nil, args...); code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, out)
		}
	}

	// The stdio block names the binary: an installed one is fine, one in
	// a go-build dir (where "go run" links) or in GOCACHE is not.
	if _, _, errText := runTroupe(t, bin, dir, nil, "codex-config"); strings.Contains(errText, "warning") {
		t.Errorf("an installed troupe is warned about: %s", errText)
	}
	tmpBuild := filepath.Join(dir, "go-build123456", "b001", "exe", "troupe")
	cache := filepath.Join(dir, "gocache")
	cached := filepath.Join(cache, "ab", "troupe")
	for _, p := range []string{tmpBuild, cached} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o700); err != nil {
			t.Fatal(err)
		}
		code, out, errText := runTroupe(t, p, dir, []string{"GOCACHE=" + cache}, "codex-config")
		if code != 0 || !strings.Contains(out, fmt.Sprintf("command = %q", p)) ||
			!strings.Contains(errText, "warning") || !strings.Contains(errText, "go clean -cache") || !strings.Contains(errText, "go install") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want the block and a warning", p, code, out, errText)
		}
	}
}

// TestHelpOfEverySubcommand: each prints a description, its flags as the
// README spells them (--flag) and an example, on stdout, exit 0; "troupe
// help CMD" is the same. Before, flags were listed as -flag with no
// description or example, several subcommands printed nothing.
func TestHelpOfEverySubcommand(t *testing.T) {
	bin := buildTroupe(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"serve"}, []string{"--workspace DIR", "--config FILE", "--http HOST:PORT", "--stdio", "--bearer-token-env NAME", "--log-level LEVEL", "--log-format FORMAT", "-c key=value", "--cpuprofile FILE"}},
		{[]string{"config", "check"}, []string{"--config FILE", "--workspace DIR", "-c key=value"}},
		{[]string{"tools"}, []string{"--json", "--config FILE", "--workspace DIR"}},
		{[]string{"codex-config"}, []string{"--http URL", "--bearer-token-env NAME", "--config FILE"}},
		{[]string{"audit", "verify"}, []string{"--config FILE", "-c key=value"}},
		{[]string{"bench"}, []string{"--stdio", "--http", "--rate", "--duration"}},
		{[]string{"version"}, nil},
	} {
		for _, form := range [][]string{append(append([]string{}, c.args...), "--help"), append([]string{"help"}, c.args...)} {
			code, out, errText := runTroupe(t, bin, dir, nil, form...)
			name := strings.Join(form, " ")
			if code != 0 || errText != "" {
				t.Errorf("%s: exit %d, stderr %q", name, code, errText)
				continue
			}
			if !strings.HasPrefix(out, "usage: troupe "+c.args[0]) || !strings.Contains(out, "\nExample:\n  troupe "+c.args[0]) {
				t.Errorf("%s: no usage line or example:\n%s", name, out)
			}
			if desc := strings.SplitN(out, "\n\n", 3); len(desc) < 2 || len(desc[1]) < 40 {
				t.Errorf("%s: no description:\n%s", name, out)
			}
			for _, f := range c.flags {
				if !strings.Contains(out, "\n  "+f) {
					t.Errorf("%s: flag %q not listed as the README spells it:\n%s", name, f, out)
				}
			}
			if regexp.MustCompile(`\n  -[a-z][a-z]`).MatchString(out) {
				t.Errorf("%s: a long flag is spelled with one dash:\n%s", name, out)
			}
		}
	}
	// A wrong flag: the error in the same spelling, exit 2, nothing on stdout.
	code, out, errText := runTroupe(t, bin, dir, nil, "tools", "--frobnicate")
	if code != 2 || out != "" || !strings.Contains(errText, "--frobnicate") || !strings.Contains(errText, "troupe tools --help") {
		t.Errorf("unknown flag: exit %d, stdout %q, stderr %q", code, out, errText)
	}
	// The overview names every subcommand and the exit codes.
	code, out, _ = runTroupe(t, bin, dir, nil, "help")
	for _, want := range []string{"serve", "config check", "tools", "codex-config", "audit verify", "bench", "version", "Exit status: 0"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("troupe help lacks %q:\n%s", want, out)
		}
	}
}

// TestVersionNamesTheRevision: "troupe version" prints the VCS revision
// and commit date the binary was built from. Before: "troupe (devel)".
func TestVersionNamesTheRevision(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git: the build has no VCS information to show")
	}
	head, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	// GOFLAGS may say -buildvcs=false (this machine's does); the flag wins.
	bin := filepath.Join(t.TempDir(), "troupe")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		if strings.Contains(string(out), "VCS") {
			t.Skipf("go cannot read the checkout's VCS status: %s", out)
		}
		t.Fatalf("go build: %v\n%s", err, out)
	}
	code, out, errText := runTroupe(t, bin, t.TempDir(), nil, "version")
	re := regexp.MustCompile(`^troupe \S+ \(revision ([0-9a-f]{40}), (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)(, modified)?, go1\.\S+\)\n$`)
	m := re.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %s", code, out, errText, re)
	}
	if m[1] != strings.TrimSpace(string(head)) {
		t.Errorf("revision %s, HEAD is %s", m[1], head)
	}
}

// TestConfigCheckReportsEveryProblemAtOnce: README promises every problem
// of a configuration at once. Before, unknown keys and wrong types hid the
// invalid values (fixing them revealed mcp.broken.sandbox_profile), and the
// invalid values came one per run (validation stopped at the first).
func TestConfigCheckReportsEveryProblemAtOnce(t *testing.T) {
	bin := buildTroupe(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "config.toml")
	body := `[limits]
call_timout = "30s"
page_size = "ten"
max_in_flight = 0

[logging]
format = "yaml"

[http]
max_sessions = 0

[http.auth]
bearer_token = "${TROUPE_TEST_UNSET_TOKEN}"

[mcp.broken]
command = "true"
sandbox_profile = "strict"

[mcp_servers.odd]
command = "true"
era = "future"
`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		":2: limits.call_timout: unknown key (did you mean limits.call_timeout?)",
		":3: limits.page_size = \"ten\": want an integer, got a string",
		":4: limits.max_in_flight",
		":7: logging.format",
		":10: http.max_sessions",
		":13: http.auth.bearer_token",
		"TROUPE_TEST_UNSET_TOKEN",
		":17: mcp.broken.sandbox_profile",
		":21: mcp_servers.odd.era",
		"8 problems in the configuration",
	}
	for _, args := range [][]string{
		{"config", "check", "--config", file, "--workspace", ws},
		{"serve", "--config", file, "--workspace", ws},
	} {
		code, out, errText := runTroupe(t, bin, dir, nil, args...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, out)
		}
		for _, w := range want {
			if !strings.Contains(errText, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, w, errText)
			}
		}
		// page_size had the wrong type: no second complaint about its value.
		if n := strings.Count(errText, "page_size"); n != 1 {
			t.Errorf("%v: page_size reported %d times:\n%s", args, n, errText)
		}
	}
}

// TestClusterConfigOnTheCommandLine: [cluster] set with -c as the README
// writes it (a list included) passes config check with a shared state key,
// and config check and serve refuse a clustered node without one (exit 2,
// naming approvals.state_key, blaming the -c that set the provider).
func TestClusterConfigOnTheCommandLine(t *testing.T) {
	bin := buildTroupe(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	cluster := []string{"--workspace", ws, "-c", "cluster.provider=etcd", "-c", "cluster.listen=127.0.0.1:7001",
		"-c", `cluster.etcd_endpoints=["127.0.0.1:2379"]`, "-c", "cluster.tls_insecure=true"}
	key := "c3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3M="

	code, out, errText := runTroupe(t, bin, dir, []string{"TROUPE_TEST_STATE_KEY=" + key},
		append([]string{"config", "check", "-c", "approvals.state_key=${TROUPE_TEST_STATE_KEY}"}, cluster...)...)
	if code != 0 || !strings.Contains(out, "provider = 'etcd'") || !strings.Contains(out, "etcd_endpoints = ['127.0.0.1:2379']") ||
		strings.Contains(out, key) {
		t.Errorf("config check of a clustered node: exit %d, stdout %q, stderr %q", code, out, errText)
	}
	for _, cmd := range []string{"config check", "serve"} {
		code, out, errText = runTroupe(t, bin, dir, nil, append(strings.Fields(cmd), cluster...)...)
		if code != 2 || out != "" || !strings.Contains(errText, "-c cluster.provider=etcd: approvals.state_key: is required") || !strings.Contains(errText, "every node must share it") {
			t.Errorf("%s without approvals.state_key: exit %d, stdout %q, stderr %q; want 2 naming approvals.state_key", cmd, code, out, errText)
		}
	}
	// The default build never links the cluster: it runs troupe-cluster
	// from beside itself, and says how to build it when it is missing.
	code, out, errText = runTroupe(t, bin, dir, []string{"TROUPE_TEST_STATE_KEY=" + key},
		append([]string{"serve", "--http", "127.0.0.1:0", "-c", "approvals.state_key=${TROUPE_TEST_STATE_KEY}"}, cluster...)...)
	if code != 2 || out != "" || !strings.Contains(errText, "troupe-cluster is not installed beside troupe") ||
		!strings.Contains(errText, "go build -tags troupe_cluster") {
		t.Errorf("serve of a clustered node without troupe-cluster: exit %d, stdout %q, stderr %q", code, out, errText)
	}
}
