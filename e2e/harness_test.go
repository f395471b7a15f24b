// Package e2e tests troupe from the outside: it builds the real binary and
// talks to it through clients troupe's authors did not write.
//
// The first such client is the official MCP TypeScript SDK, driven by
// tsclient/runner.mjs. A test describes a scenario (a transport and a list of
// steps), runScenario hands it to the runner, and the test asserts on the
// runner's JSON report:
//
//	fx := newFixture(t)
//	res := runScenario(t, scenario{
//		Transport: stdioTransport(t, fx.dir),
//		Steps:     []step{{Op: "listTools"}},
//	})
//
// The same scenarios run over streamable HTTP against `troupe serve --http`
// on a free loopback port (see httpserver_test.go):
//
//	srv := startHTTPServer(t, fx.dir, newToken(t)) // "" for no auth
//	res := runScenario(t, scenario{Transport: srv.transport(), Steps: ...})
//
// The second client is the real Codex CLI (codex_test.go), run offline
// against a scripted stand-in for the model (codexmodel_test.go).
//
// The OAuth tests (oauth_test.go) add a real authorization server,
// oidc-provider on loopback (oidc/provider.mjs, started by
// oidc_harness_test.go), whose tokens troupe must accept or refuse.
//
// The runner needs e2e/tsclient/node_modules, Codex e2e/codex/node_modules
// and the authorization server e2e/oidc/node_modules; scripts/test installs
// them.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// scenarioTimeout bounds one runner invocation: start, every step, shutdown.
const scenarioTimeout = 2 * time.Minute

var (
	// moduleRoot is the absolute path of the troupe module (the parent of
	// this package's directory, where go test runs us).
	moduleRoot string
	// binDir holds the troupe binary; TestMain makes and removes it.
	binDir string

	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain is TestMain's body, apart so its deferred cleanup runs before
// os.Exit.
func runMain(m *testing.M) int {
	root, err := filepath.Abs("..")
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "go.mod"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cannot find the module root: %v\n", err)
		return 1
	}
	moduleRoot = root
	binDir, err = os.MkdirTemp("", "troupe-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	// Servers write their audit log under $XDG_STATE_HOME: keep it out of
	// the home directory of whoever runs the tests. Children started with
	// a trimmed environment (the TS SDK, Codex) get it from serverEnv.
	stateHome = filepath.Join(binDir, "state")
	if err := os.Setenv("XDG_STATE_HOME", stateHome); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	return m.Run()
}

// troupeBinary returns the path of the troupe binary: $TROUPE_E2E_BINARY
// when set (to test a binary built elsewhere), else one built on first use.
// The build happens once per test binary, and lazily rather than in TestMain
// so that `go test -list` and runs that select no e2e test cost nothing. When
// the tests run under -race, so does the server: the e2e flows are where its
// actors interleave the most.
func troupeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("TROUPE_E2E_BINARY"); bin != "" {
		return bin
	}
	bin := filepath.Join(binDir, "troupe")
	buildOnce.Do(func() {
		args := []string{"build", "-o", bin}
		if raceEnabled() {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/troupe")...)
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
			return
		}
		// troupe-sandbox beside troupe, built as README says (static: no
		// cgo): the standalone sandbox helper troupe prefers, as an
		// installation has it.
		cmd = exec.Command("go", "build", "-o", filepath.Join(binDir, "troupe-sandbox"), "./cmd/troupe-sandbox")
		cmd.Dir = moduleRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building troupe: %v", buildErr)
	}
	return bin
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// A scenario is what runner.mjs reads: how to reach the server, and what to
// ask it, in order, within one session.
type scenario struct {
	Transport transport `json:"transport"`
	Steps     []step    `json:"steps"`
	// Elicitation, when set, makes the client declare the elicitation
	// capability and answer the server's requests with these, in order
	// ({"never": true}: no answer).
	Elicitation []map[string]any `json:"elicitation,omitempty"`
	// Sampling, when set, makes the client declare sampling and answer
	// sampling/createMessage with these results, in order.
	Sampling []map[string]any `json:"sampling,omitempty"`
}

// transport says how the runner reaches the server: Kind "stdio" spawns
// Command, Kind "http" posts to URL.
type transport struct {
	Kind    string            `json:"kind"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// OAuth, over HTTP, makes the SDK authorize by itself (see runner.mjs).
	OAuth *oauthClient `json:"oauth,omitempty"`
}

// step is one request: Op "listTools" (all pages) or "callTool".
type step struct {
	Op        string `json:"op"`
	Name      string `json:"name,omitempty"`
	Arguments any    `json:"arguments,omitempty"`
	URI       string `json:"uri,omitempty"`      // readResource
	Progress  bool   `json:"progress,omitempty"` // callTool: ask for progress, report progressCount
	// complete: the completion's ref and argument.
	Ref      any `json:"ref,omitempty"`
	Argument any `json:"argument,omitempty"`
}

func listTools() step { return step{Op: "listTools"} }

func callTool(name string, args any) step {
	return step{Op: "callTool", Name: name, Arguments: args}
}

// result is the runner's report.
type result struct {
	ServerVersion   *implementation   `json:"serverVersion"`
	ProtocolVersion string            `json:"protocolVersion"`
	Steps           []stepResult      `json:"steps"`
	Elicitations    []json.RawMessage `json:"elicitations"`
	Samplings       []json.RawMessage `json:"samplings"`
	// OAuth is there when the transport had OAuth: how many tokens the
	// SDK obtained.
	OAuth *struct {
		Tokens int `json:"tokens"`
	} `json:"oauth"`
}

type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// stepResult is one step's outcome: the MCP result when OK, otherwise the
// error the SDK raised (a JSON-RPC error, or a result it refused to accept,
// such as structuredContent that does not match the tool's outputSchema).
type stepResult struct {
	OK            bool            `json:"ok"`
	Result        json.RawMessage `json:"result"`
	Error         *stepError      `json:"error"`
	ProgressCount int             `json:"progressCount"`
}

type stepError struct {
	Message string          `json:"message"`
	Code    *int            `json:"code"`
	Data    json.RawMessage `json:"data"`
}

func (r stepResult) String() string {
	if r.OK {
		return "ok: " + string(r.Result)
	}
	b, _ := json.Marshal(r.Error)
	return "error: " + string(b)
}

// stdioTransport runs `troupe serve` on workspace, logging at debug level:
// the log is shown only when a test fails, and then more is better.
func stdioTransport(t *testing.T, workspace string) transport {
	t.Helper()
	requireRunner(t) // skip before building a binary nothing would run
	return transport{
		Kind:    "stdio",
		Command: troupeBinary(t),
		Args:    []string{"serve", "--workspace", workspace, "--log-level", "debug"},
		Env:     serverEnv(nil),
	}
}

// stateHome is the servers' $XDG_STATE_HOME (their audit logs).
var stateHome string

// serverEnv is env plus what every troupe server of the tests needs, for
// clients that start servers with a trimmed environment.
func serverEnv(env map[string]string) map[string]string {
	out := map[string]string{"XDG_STATE_HOME": stateHome}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// runScenario runs sc through runner.mjs and returns its report, one
// stepResult per step. It fails the test, with the runner's stderr (which
// carries the server's log), when the runner itself fails; the stderr is
// also logged if the test fails later.
func runScenario(t *testing.T, sc scenario) result {
	t.Helper()
	run := execRunner(t, sc)
	if run.err != nil {
		t.Fatalf("runner: %v", run.err)
	}
	if strings.Contains(run.stderr, "WARNING: DATA RACE") {
		t.Errorf("the server reported a data race")
	}

	var res result
	if err := json.Unmarshal([]byte(run.stdout), &res); err != nil {
		t.Fatalf("runner printed no JSON report (%v):\n%s", err, run.stdout)
	}
	if len(res.Steps) != len(sc.Steps) {
		t.Fatalf("runner reported %d steps, want %d", len(res.Steps), len(sc.Steps))
	}
	return res
}

// runnerRun is what one runner.mjs process left behind.
type runnerRun struct {
	stdout, stderr string
	err            error // from exec: nil, or an *exec.ExitError saying why
}

// exitCode is the runner's exit status, or -1 when it did not exit by itself.
func (r runnerRun) exitCode() int {
	var exit *exec.ExitError
	switch {
	case r.err == nil:
		return 0
	case errors.As(r.err, &exit):
		return exit.ExitCode()
	}
	return -1
}

// The runner's exit statuses other than 0 and 1 (see runner.mjs).
const (
	runnerBadScenario   = 2
	runnerCannotConnect = 3
)

// execRunner runs sc through runner.mjs, whatever comes of it: runScenario
// for runs that must succeed, tests of refusals directly. It fails the test
// only when the runner cannot be started or overruns scenarioTimeout. The
// runner's stderr is logged if the test fails.
func execRunner(t *testing.T, sc scenario) runnerRun {
	t.Helper()
	runner := requireRunner(t)
	input, err := json.Marshal(sc)
	if err != nil {
		t.Fatalf("encoding scenario: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), scenarioTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", runner)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The server inherits the runner's stderr; should it outlive the runner,
	// do not wait on it forever for the pipe to close.
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("scenario: %s\nrunner stderr (with the server's, over stdio):\n%s", input, stderr.String())
		}
	})
	if runErr != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("runner timed out after %v", time.Since(start).Round(time.Millisecond))
	}
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		t.Fatalf("running the runner: %v", runErr)
	}
	return runnerRun{stdout: stdout.String(), stderr: stderr.String(), err: runErr}
}

// requireRunner returns the path of runner.mjs once node and the SDK are
// there. Outside CI it skips when they are not, so `go test ./...` works on a
// machine without Node; in CI their absence is a broken setup, not a reason
// to test less.
func requireRunner(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(moduleRoot, "e2e", "tsclient")
	var missing string
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		missing = "e2e/tsclient/node_modules has no @modelcontextprotocol/sdk"
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; scripts/test should have installed it", missing)
		}
		t.Skipf("%s: run scripts/test (installs the TypeScript SDK)", missing)
	}
	return filepath.Join(dir, "runner.mjs")
}

// fixture is a workspace with known contents, and the facts tests assert.
type fixture struct {
	root string // the test's temp dir: the host path no answer may reveal
	dir  string // the workspace, root/ws

	readme string // content of README.md

	needle     string // a token in src/main.go, docs/guide.md and ignored.txt
	needleFile string // "src/main.go"
	needleLine int    // 1-based line of needle in needleFile
	needleText string // that whole line

	ignoredFile string // matched by .gitignore; ripgrep must not see it
	secret      string // content of root/secret.txt, outside the workspace
}

// newFixture makes a fresh workspace in t.TempDir():
//
//	root/secret.txt                 outside the workspace
//	root/ws/.git/HEAD               so ripgrep honours .gitignore without --no-require-git
//	root/ws/.gitignore              ignores ignored.txt and build/
//	root/ws/README.md
//	root/ws/ignored.txt             contains the needle, but is ignored
//	root/ws/build/out.txt           ignored too
//	root/ws/src/main.go             the needle on line 4
//	root/ws/src/nested/deep/data.txt
//	root/ws/docs/guide.md           the needle again, for glob filtering
//	root/ws/escape -> ../secret.txt a symlink leading out
func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	fx := fixture{
		root:        root,
		dir:         filepath.Join(root, "ws"),
		readme:      "# demo\n\nA workspace for troupe's end-to-end tests.\n",
		needle:      "troupe_e2e_needle",
		needleFile:  "src/main.go",
		needleLine:  4,
		needleText:  "func troupe_e2e_needle() {}",
		ignoredFile: "ignored.txt",
		secret:      "outside-the-workspace secret\n",
	}
	writeTree(t, root, map[string]string{"secret.txt": fx.secret})
	writeTree(t, fx.dir, map[string]string{
		".git/HEAD":                "ref: refs/heads/main\n",
		".gitignore":               "ignored.txt\nbuild/\n",
		"README.md":                fx.readme,
		"ignored.txt":              "troupe_e2e_needle in an ignored file\n",
		"build/out.txt":            "troupe_e2e_needle in an ignored directory\n",
		"src/main.go":              "package main\n\n// The next line is what ripgrep must find.\n" + fx.needleText + "\n\nfunc main() {}\n",
		"src/nested/deep/data.txt": "deep data\n",
		"docs/guide.md":            "# Guide\n\nSearch for troupe_e2e_needle.\n",
	})
	if err := os.Symlink(filepath.Join("..", "secret.txt"), filepath.Join(fx.dir, "escape")); err != nil {
		t.Fatal(err)
	}
	return fx
}

// writeTree writes files (slash-separated paths relative to dir, to contents),
// making directories as needed.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
