package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Credentials troupe holds for others: a downstream server that wants a
// token troupe does not have, or refuses the one it sends, and a command
// tool whose ${NAME} is unset, are "unauthenticated" with a hint that
// names the variable to set, never its value: in a call's result, the
// log, `troupe tools` and the status page. A reload that names a variable
// that is set clears it.

// dsTokenVar is the variable the front troupe's bearer_token_env_var
// names in these tests.
const dsTokenVar = "E2E_DS_TOKEN"

// protectedDownstream starts a troupe over HTTP whose token is written in
// its config file (so a rewrite of the file changes it), and returns the
// server and the file.
func protectedDownstream(t *testing.T, token string) (*httpServer, string) {
	t.Helper()
	fx := newFixture(t)
	file := filepath.Join(t.TempDir(), "downstream.toml")
	writeConfig(t, file, fmt.Sprintf("[http.auth]\nbearer_token = %q\n", token))
	return startHTTPServer(t, fx.dir, "", "--config", file), file
}

// writeConfig writes a config file.
func writeConfig(t *testing.T, file, text string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dsTable is the front's [mcp_servers.ds] table for the downstream at url,
// with its token in the variable tokenVar.
func dsTable(url, tokenVar string) string {
	return fmt.Sprintf("[mcp_servers.ds]\nurl = %q\nbearer_token_env_var = %q\nrequires_approval = false\nstartup_timeout_sec = 10\n", url, tokenVar)
}

// troupeTools runs `troupe tools` with env added to the test's own, and
// returns its line about the server name.
func troupeTools(t *testing.T, workspace, cfg, name string, env ...string) (line, all string) {
	t.Helper()
	cmd := exec.Command(troupeBinary(t), "tools", "--workspace", workspace, "--config", cfg)
	cmd.Env = append(withoutVar(os.Environ(), dsTokenVar), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("troupe tools: %v\n%s", err, out)
	}
	for l := range strings.Lines(string(out)) {
		if strings.HasPrefix(l, "server "+name+": ") {
			line = l
		}
	}
	return line, string(out)
}

// noValue fails when text shows any of values.
func noValue(t *testing.T, where, text string, values ...string) {
	t.Helper()
	for _, v := range values {
		if strings.Contains(text, v) {
			t.Errorf("%s shows the secret %q:\n%s", where, v, text)
		}
	}
}

// `troupe tools`: a downstream server whose bearer_token_env_var is unset,
// and one whose token it refuses (HTTP 401), show as unauthenticated with
// the variable named and its value absent; with the right token, ready.
func TestToolsCommandShowsUnauthenticatedServer(t *testing.T) {
	good, wrong := newToken(t), "wrong-"+newToken(t)
	down, _ := protectedDownstream(t, good)
	fx := newFixture(t)
	cfg := downstreamConfig(t, dsTable(down.url, dsTokenVar))

	line, out := troupeTools(t, fx.dir, cfg, "ds")
	if !strings.HasPrefix(line, "server ds: unauthenticated: ") || !strings.Contains(line, "set the environment variable "+dsTokenVar) {
		t.Errorf("an unset bearer_token_env_var: troupe tools says\n%s", out)
	}
	if !strings.Contains(out, "credential is not set") {
		t.Errorf("troupe tools does not warn of the unset variable:\n%s", out)
	}

	line, out = troupeTools(t, fx.dir, cfg, "ds", dsTokenVar+"="+wrong)
	if !strings.HasPrefix(line, "server ds: unauthenticated: ") || !strings.Contains(line, "HTTP 401") ||
		!strings.Contains(line, "environment variable "+dsTokenVar) {
		t.Errorf("a refused token: troupe tools says\n%s", out)
	}
	noValue(t, "troupe tools", out, wrong, good)

	line, out = troupeTools(t, fx.dir, cfg, "ds", dsTokenVar+"="+good)
	if !strings.HasPrefix(line, "server ds: ready") {
		t.Errorf("the right token: troupe tools says\n%s", out)
	}

	// config check serves the same config: it warns, and passes.
	cmd := exec.Command(troupeBinary(t), "config", "check", "--workspace", fx.dir, "--config", cfg)
	cmd.Env = withoutVar(os.Environ(), dsTokenVar)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), dsTokenVar) {
		t.Errorf("config check with the variable unset: %v\n%s", err, out)
	}
}

// dsState is the status page's entry for the server ds.
func dsState(s statusSnapshot) (state, hint string) {
	for _, d := range s.Downstreams {
		if d.Name == "ds" {
			return d.State, d.Err
		}
	}
	return "", ""
}

// callWith calls tool with args (JSON) and returns the answer's body.
func (s *mcpSession) callWith(t *testing.T, id int, tool, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp := s.post(ctx, t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("calling %s: %s %s", tool, resp.Status, body)
	}
	return string(body)
}

// waitReload waits for one more "configuration reloaded" in srv's log
// than before.
func waitReload(t *testing.T, srv *httpServer, before int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); strings.Count(srv.log.String(), "configuration reloaded") == before; {
		if time.Now().After(end) {
			t.Fatalf("the config edit was not reloaded:\n%s", srv.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serve: a refused token shows on the status page and in the log, naming
// the variable; a reload naming a variable that holds the right token
// connects the server; when the downstream then changes its token, a call
// answers unauthenticated naming the variable, and the page says so.
func TestDownstreamUnauthenticatedInStatusLogAndCall(t *testing.T) {
	good, wrong := newToken(t), "wrong-"+newToken(t)
	down, downCfg := protectedDownstream(t, good)
	t.Setenv(dsTokenVar, wrong)
	t.Setenv(dsTokenVar+"_GOOD", good)
	fx := newFixture(t)
	cfg := downstreamConfig(t, dsTable(down.url, dsTokenVar))
	front := startHTTPServer(t, fx.dir, newToken(t), "--config", cfg)

	snap := waitStatus(t, front, "ds unauthenticated", func(s statusSnapshot) bool {
		state, _ := dsState(s)
		return state == "unauthenticated"
	})
	if _, hint := dsState(snap); !strings.Contains(hint, "HTTP 401") || !strings.Contains(hint, dsTokenVar) {
		t.Errorf("the status page's hint: %q", hint)
	}
	var warning string
	for l := range strings.Lines(front.log.String()) {
		if strings.Contains(l, "credential is missing or refused") && strings.Contains(l, dsTokenVar) {
			warning = l
		}
	}
	if warning == "" {
		t.Errorf("no warning naming %s in the log:\n%s", dsTokenVar, front.log)
	}

	// A reload that names the variable holding the right token.
	before := strings.Count(front.log.String(), "configuration reloaded")
	writeConfig(t, cfg, dsTable(down.url, dsTokenVar+"_GOOD")+waitForDownstreams)
	waitReload(t, front, before)
	// Ready, and its tools in the registry: the rebuild that serves them
	// (and pins them) follows the connection.
	waitStatus(t, front, "ds ready after the reload, its tools served", func(s statusSnapshot) bool {
		for _, d := range s.Downstreams {
			if d.Name == "ds" {
				return d.State == "ready" && d.Exposed > 0
			}
		}
		return false
	})
	s := openSession(t, front)
	if body := s.callWith(t, 2, "ds.repo.listDir", `{"path":"."}`); strings.Contains(body, `"isError":true`) || !strings.Contains(body, "README.md") {
		t.Fatalf("a call once the token is right: %s", body)
	}

	// The downstream's token changes: troupe's is refused on the next call.
	writeConfig(t, downCfg, fmt.Sprintf("[http.auth]\nbearer_token = %q\n", newToken(t)))
	var body string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		body = s.callWith(t, 3, "ds.repo.listDir", `{"path":"."}`)
		if strings.Contains(body, `"isError":true`) || time.Now().After(end) {
			break
		}
	}
	if !strings.Contains(body, `"kind":"unauthenticated"`) || !strings.Contains(body, "environment variable "+dsTokenVar+"_GOOD") ||
		!strings.Contains(body, "HTTP 401") {
		t.Errorf("a call whose token the server refuses: %s", body)
	}
	snap = waitStatus(t, front, "ds unauthenticated again", func(s statusSnapshot) bool {
		state, _ := dsState(s)
		return state == "unauthenticated"
	})
	_, statusBody := adminGet(t, front, "/status/")
	noValue(t, "the log", front.log.String(), wrong, good)
	noValue(t, "the status page", string(statusBody), wrong, good)
	noValue(t, "the call's result", body, wrong, good)
}

// An unset ${NAME} in a command tool's env: config check and serve start
// (with a warning naming it), the call answers unauthenticated naming it,
// and a reload that refers to a variable that is set makes the tool work.
func TestCommandToolUnsetVariableIsUnauthenticated(t *testing.T) {
	const unset, set = "E2E_UNSET_GREETING", "E2E_SET_GREETING"
	t.Setenv(set, "hello-from-the-env")
	t.Setenv(unset, "") // restored at the end
	os.Unsetenv(unset)
	fx := newFixture(t)
	table := func(v string) string {
		return fmt.Sprintf("[mcp.greet]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"echo got-${{#GREETING}}-chars\"]\nenv = { GREETING = \"${%s}\" }\nrequires_approval = false\nsandbox_profile = \"none\"\n", v)
	}
	cfg := downstreamConfig(t, table(unset))

	out, err := exec.Command(troupeBinary(t), "config", "check", "--workspace", fx.dir, "--config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), unset) {
		t.Fatalf("config check with %s unset: %v\n%s", unset, err, out)
	}

	front := startHTTPServer(t, fx.dir, newToken(t), "--config", cfg)
	if !strings.Contains(front.log.String(), "credential is not set") || !strings.Contains(front.log.String(), unset) {
		t.Errorf("serve does not warn of %s:\n%s", unset, front.log)
	}
	s := openSession(t, front)
	body := s.call(t, 2, "greet")
	if !strings.Contains(body, `"kind":"unauthenticated"`) || !strings.Contains(body, "set the environment variable "+unset) {
		t.Fatalf("a call with %s unset: %s", unset, body)
	}

	before := strings.Count(front.log.String(), "configuration reloaded")
	writeConfig(t, cfg, table(set)+waitForDownstreams)
	waitReload(t, front, before)
	if body := s.call(t, 3, "greet"); strings.Contains(body, `"isError":true`) || !strings.Contains(body, "got-18-chars") {
		t.Fatalf("a call once the variable is set: %s", body)
	}
}
