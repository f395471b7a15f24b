package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runBench runs the troupe binary's bench command with env added to ours
// (without the token variable unless env sets it) and returns the exit
// code, stdout and stderr.
func runBench(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(troupeBinary(t), append([]string{"bench"}, args...)...)
	cmd.Env = append(withoutVar(os.Environ(), tokenEnv), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("troupe bench %v: %v", args, err)
	}
	return 0, stdout.String(), stderr.String()
}

// TestBenchOverHTTPSaysWhatWentWrong: `troupe bench` against troupe over
// HTTP, as README shows it. Before, a missing token failed with "HTTP 401
// Unauthorized" and no word of --bearer-token-env, an unknown tool was
// "errors isError 200" without the tool's text, and a soak without --pid
// printed an RSS of 0.0 MiB as if measured.
func TestBenchOverHTTPSaysWhatWentWrong(t *testing.T) {
	fx := newFixture(t)
	token := newToken(t)
	srv := startHTTPServer(t, fx.dir, token, "-c", "tools.benchmark_echo=true")

	code, _, errText := runBench(t, nil, "--http", srv.url, "--calls", "5")
	if code != 1 || !strings.Contains(errText, "401") || !strings.Contains(errText, "--bearer-token-env") {
		t.Errorf("without a token: exit %d, stderr %q; want 1 naming 401 and --bearer-token-env", code, errText)
	}
	code, _, errText = runBench(t, []string{"WRONG_TOKEN=nope"}, "--http", srv.url, "--calls", "5", "--bearer-token-env", "WRONG_TOKEN")
	if code != 1 || !strings.Contains(errText, "refused the token") || !strings.Contains(errText, "WRONG_TOKEN") {
		t.Errorf("with a wrong token: exit %d, stderr %q; want 1 saying the token in WRONG_TOKEN was refused", code, errText)
	}

	auth := []string{tokenEnv + "=" + token}
	code, out, errText := runBench(t, auth, "--http", srv.url, "--calls", "20", "--concurrency", "4",
		"--bearer-token-env", tokenEnv, "--tool", "no.such.tool")
	if code != 0 || !strings.Contains(out, "isError 20") {
		t.Fatalf("unknown tool: exit %d, stdout %q, stderr %q; want 0 and isError 20", code, out, errText)
	}
	// The server's text, once however many calls failed with it.
	if n := strings.Count(out, "no.such.tool"); n != 2 { // the "tool" row and one error text
		t.Errorf("unknown tool: the tool's name appears %d times, want the tool row and one deduplicated error text:\n%s", n, out)
	}
	if !strings.Contains(out, "isError: ") {
		t.Errorf("unknown tool: no error text:\n%s", out)
	}

	code, out, errText = runBench(t, auth, "soak", "--http", srv.url, "--rate", "20", "--duration", "2s", "--interval", "1s",
		"--bearer-token-env", tokenEnv)
	if code != 0 {
		t.Fatalf("soak: exit %d, stdout %q, stderr %q", code, out, errText)
	}
	if strings.Contains(out, " 0.0") || !strings.Contains(out, "n/a") {
		t.Errorf("soak without --pid: want RSS n/a, not 0.0:\n%s", out)
	}
}

// TestBenchStatelessOverHTTP: `troupe bench --stateless` drives troupe's
// 2026-07-28 path (server/discover, then tools/calls without a session)
// and says so; a refused token is still a refused token, not a server
// without server/discover.
func TestBenchStatelessOverHTTP(t *testing.T) {
	fx := newFixture(t)
	token := newToken(t)
	srv := startHTTPServer(t, fx.dir, token, "-c", "tools.benchmark_echo=true")

	code, _, errText := runBench(t, nil, "--stateless", "--http", srv.url, "--calls", "5")
	if code != 1 || !strings.Contains(errText, "401") || !strings.Contains(errText, "--bearer-token-env") {
		t.Errorf("without a token: exit %d, stderr %q; want 1 naming 401 and --bearer-token-env", code, errText)
	}
	auth := []string{tokenEnv + "=" + token}
	code, out, errText := runBench(t, auth, "--stateless", "--http", srv.url, "--calls", "200", "--concurrency", "8",
		"--bearer-token-env", tokenEnv, "--json")
	if code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errText)
	}
	for _, want := range []string{`"stateless": "2026-07-28"`, `"ok": 200`, `"errors": {}`, `"sessions": 0`} {
		if !strings.Contains(out, want) {
			t.Errorf("report without %s:\n%s", want, out)
		}
	}
}
