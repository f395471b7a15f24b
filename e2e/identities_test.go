package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// identityServer is troupe over HTTP with three named tokens from a
// config file: alice (repo.* and shell.exec), bob (repo.listDir and
// shell.exec) and ops, the one operator; an audit log at auditLog.
type identityServer struct {
	*httpServer
	auditLog string
}

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789"
	opsToken   = "ops-token-0123456789"
)

func startIdentityServer(t *testing.T, fx fixture) *identityServer {
	t.Helper()
	auditLog := filepath.Join(fx.root, "audit.jsonl")
	cfg := filepath.Join(fx.root, "troupe.toml")
	writeTree(t, fx.root, map[string]string{"troupe.toml": fmt.Sprintf(`[audit]
path = %q

[auth]
operators = ["ops"]

[[auth.tokens]]
name = "alice"
token_env = "E2E_ALICE_TOKEN"
allow_tools = ["repo.*", "shell.exec"]

[[auth.tokens]]
name = "bob"
token_env = "E2E_BOB_TOKEN"
allow_tools = ["repo.listDir", "shell.exec"]

[[auth.tokens]]
name = "ops"
token_env = "E2E_OPS_TOKEN"
`, auditLog)})
	t.Setenv("E2E_ALICE_TOKEN", aliceToken)
	t.Setenv("E2E_BOB_TOKEN", bobToken)
	t.Setenv("E2E_OPS_TOKEN", opsToken)
	return &identityServer{httpServer: startHTTPServer(t, fx.dir, "", "--config", cfg), auditLog: auditLog}
}

// as sends one POST to the MCP endpoint with token; modern adds the
// 2026-07-28 headers for method (and name). It returns the status, the
// headers and the body.
func (s *identityServer) as(t *testing.T, token, session, body string, modern bool, method, name string) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if modern {
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// asJSON is as, its body decoded.
func (s *identityServer) asJSON(t *testing.T, token, session, body string, modern bool, method, name string) (int, map[string]any) {
	t.Helper()
	status, _, b := s.as(t, token, session, body, modern, method, name)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: not JSON: %d %q", method, status, b)
	}
	return status, m
}

// session initializes a 2025-06-18 session for token and returns its id.
func (s *identityServer) session(t *testing.T, token string) string {
	t.Helper()
	status, hdr, body := s.as(t, token, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"e2e-identities","version":"1"}}}`, false, "", "")
	id := hdr.Get("Mcp-Session-Id")
	if status != 200 || id == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	if status, _, body := s.as(t, token, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, "", ""); status != 202 {
		t.Fatalf("notifications/initialized: %d %s", status, body)
	}
	return id
}

// admin GETs an operators' path with token.
func (s *identityServer) admin(t *testing.T, token, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// withoutName is a tool result's text with name and the correlation id
// taken out, to compare two refusals.
func withoutName(t *testing.T, m map[string]any, name string) string {
	t.Helper()
	if !isToolError(m) {
		t.Fatalf("want an isError result, got %v", m)
	}
	text := strings.ReplaceAll(resultText(t, m), name, "NAME")
	return regexp.MustCompile(`c-[0-9a-zA-Z]+`).ReplaceAllString(text, "CID")
}

// Two named tokens with different allow_tools, against the real binary:
// each lists only its tools (both eras; 2026-07-28 private), a call
// outside them is answered as an unknown tool's, a session or an
// approval state of one is nothing to the other, the audit log names
// each, only the operator sees /metrics (calls counted by identity) and
// all of /status/, where sessions and calls name their identity, and a
// tenant's page in Chromium shows its own and nothing of the other's.
func TestIdentitiesOverHTTP(t *testing.T) {
	fx := newFixture(t)
	s := startIdentityServer(t, fx)

	// Tool lists, in both eras.
	listNames := func(m map[string]any) []string {
		res, _ := m["result"].(map[string]any)
		list, _ := res["tools"].([]any)
		var names []string
		for _, x := range list {
			names = append(names, x.(map[string]any)["name"].(string))
		}
		return names
	}
	alice, bob := s.session(t, aliceToken), s.session(t, bobToken)
	_, m := s.asJSON(t, aliceToken, alice, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, false, "", "")
	aliceTools := listNames(m)
	if !slices.Contains(aliceTools, "repo.readFile") || !slices.Contains(aliceTools, "shell.exec") ||
		slices.ContainsFunc(aliceTools, func(n string) bool { return !strings.HasPrefix(n, "repo.") && n != "shell.exec" }) {
		t.Errorf("alice's tools: %v", aliceTools)
	}
	_, m = s.asJSON(t, bobToken, bob, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, false, "", "")
	if got := listNames(m); !slices.Equal(got, []string{"repo.listDir", "shell.exec"}) {
		t.Errorf("bob's tools: %v", got)
	}
	_, m = s.asJSON(t, bobToken, "", modernRequest("3", "tools/list", ""), true, "tools/list", "")
	res := checkModernResult(t, "bob's 2026-07-28 tools/list", m)
	if got := listNames(m); !slices.Equal(got, []string{"repo.listDir", "shell.exec"}) || res["cacheScope"] != "private" {
		t.Errorf("bob's 2026-07-28 tools/list: %v, cacheScope %v", got, res["cacheScope"])
	}

	// A call outside bob's tools is an unknown tool's answer, in both eras.
	call := func(name string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":%q,"arguments":{"path":"README.md"}}}`, name)
	}
	_, hidden := s.asJSON(t, bobToken, bob, call("repo.readFile"), false, "", "")
	_, unknown := s.asJSON(t, bobToken, bob, call("repo.noSuchTool"), false, "", "")
	if a, b := withoutName(t, hidden, "repo.readFile"), withoutName(t, unknown, "repo.noSuchTool"); a != b {
		t.Errorf("bob's call of repo.readFile answered %q, an unknown tool %q", a, b)
	}
	if strings.Contains(fmt.Sprint(hidden), fx.readme) {
		t.Error("bob read README.md")
	}
	_, hidden = s.asJSON(t, bobToken, "", modernRequest("5", "tools/call", `"name":"repo.readFile","arguments":{"path":"README.md"}`), true, "tools/call", "repo.readFile")
	_, unknown = s.asJSON(t, bobToken, "", modernRequest("5", "tools/call", `"name":"repo.noSuchTool","arguments":{"path":"README.md"}`), true, "tools/call", "repo.noSuchTool")
	if a, b := withoutName(t, hidden, "repo.readFile"), withoutName(t, unknown, "repo.noSuchTool"); a != b {
		t.Errorf("bob's 2026-07-28 call of repo.readFile answered %q, an unknown tool %q", a, b)
	}
	_, m = s.asJSON(t, aliceToken, alice, call("repo.readFile"), false, "", "")
	if !strings.Contains(resultText(t, m), "A workspace for troupe") {
		t.Errorf("alice's repo.readFile: %v", m)
	}

	// Bob with alice's session id: 404, nothing of the session.
	status, _, body := s.as(t, bobToken, alice, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`, false, "", "")
	if status != 404 || strings.Contains(string(body), "repo.readFile") {
		t.Errorf("bob with alice's session: %d %s", status, body)
	}

	// An approval state of alice's is refused to bob (same tool, same
	// arguments), and still opens for alice.
	execCall := `"name":"shell.exec","arguments":{"command":["touch","identities-marker"]}`
	_, m = s.asJSON(t, aliceToken, "", modernRequest("7", "tools/call", execCall), true, "tools/call", "shell.exec")
	state := inputRequiredState(t, m, false)
	if !strings.Contains(fmt.Sprint(m), "Asked by: token:alice") {
		t.Errorf("alice's approval form does not name her: %v", m)
	}
	_, m = s.asJSON(t, bobToken, "", modernRequest("7", "tools/call", execCall+mrtrRetry(state, "once")), true, "tools/call", "shell.exec")
	if code, _ := errorCode(t, m); code != -32602 {
		t.Errorf("bob with alice's approval state: %v", m)
	}
	marker := filepath.Join(fx.dir, "identities-marker")
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("bob's retry with alice's state ran the call: %v", err)
	}
	_, m = s.asJSON(t, aliceToken, "", modernRequest("7", "tools/call", execCall+mrtrRetry(state, "once")), true, "tools/call", "shell.exec")
	checkModernResult(t, "alice's approved call", m)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("alice's approved call did not run: %v", err)
	}

	// 2026-07-28 outputs are kept per identity: alice's call's stdout is
	// hers to read, and not found for bob.
	seq := `"name":"shell.exec","arguments":{"command":["seq","1","100000"]}`
	_, m = s.asJSON(t, aliceToken, "", modernRequest("8", "tools/call", seq), true, "tools/call", "shell.exec")
	state = inputRequiredState(t, m, false)
	_, m = s.asJSON(t, aliceToken, "", modernRequest("8", "tools/call", seq+mrtrRetry(state, "once")), true, "tools/call", "shell.exec")
	checkModernResult(t, "alice's seq", m)
	uri := outputLink(t, m)
	read := modernRequest("9", "resources/read", fmt.Sprintf(`"uri":%q`, uri))
	_, m = s.asJSON(t, bobToken, "", read, true, "resources/read", uri)
	if _, ok := m["error"]; !ok || strings.Contains(fmt.Sprint(m), "99999") {
		t.Errorf("bob read alice's output: %.300v", m)
	}
	_, m = s.asJSON(t, aliceToken, "", read, true, "resources/read", uri)
	if text := readContents(t, "alice's output", m); !strings.Contains(text, "99999") {
		t.Errorf("alice's output: %.200q", text)
	}

	// The operators' paths: /metrics is the operator's only; the operator
	// sees every session with its identity, a tenant its own.
	if status, body := s.admin(t, aliceToken, "/metrics"); status != 403 || strings.Contains(string(body), "troupe_calls_total") {
		t.Errorf("alice GET /metrics: %d %.200s", status, body)
	}
	for _, path := range []string{"/status", "/status/", "/metrics"} {
		if status, _ := s.admin(t, opsToken, path); status != 200 {
			t.Errorf("ops GET %s: %d", path, status)
		}
	}
	// Tool calls are counted by identity, a bounded label.
	_, metrics := s.admin(t, opsToken, "/metrics")
	if !regexp.MustCompile(`troupe_calls_total\{era="legacy",identity="token:alice",outcome="ok",tool="repo.readFile"\} 1\n`).Match(metrics) ||
		!regexp.MustCompile(`troupe_call_duration_seconds_count\{identity="token:bob",tool="repo.readFile"\} [1-9]`).Match(metrics) {
		t.Errorf("/metrics does not count alice's and bob's calls by identity:\n%s", grepLines(string(metrics), "troupe_call"))
	}
	_, snap := s.admin(t, opsToken, "/status/")
	var snapshot struct {
		Sessions []struct {
			ID, Identity string
		} `json:"sessions"`
		Audit []struct {
			Tool, Identity string
		} `json:"audit"`
	}
	if err := json.Unmarshal(snap, &snapshot); err != nil {
		t.Fatalf("/status/: %v %.300s", err, snap)
	}
	names := map[string]bool{}
	for _, x := range snapshot.Sessions {
		names[x.Identity] = true
	}
	for _, x := range snapshot.Audit {
		names["audit "+x.Identity] = true
	}
	if !names["token:alice"] || !names["token:bob"] || !names["audit token:alice"] || !names["audit token:bob"] {
		t.Errorf("the status snapshot does not name both identities: %v", names)
	}
	if strings.Contains(string(snap), aliceToken) || strings.Contains(string(snap), bobToken) {
		t.Error("the status snapshot holds a token")
	}
	// Alice's own view: her sessions, none of bob's (by the ids the
	// operator sees).
	var bobSessions []string
	for _, x := range snapshot.Sessions {
		if x.Identity == "token:bob" {
			bobSessions = append(bobSessions, x.ID)
		}
	}
	if len(bobSessions) == 0 {
		t.Fatalf("the operator sees no session of bob's: %.600s", snap)
	}
	showsBob := func(text string) bool {
		return strings.Contains(text, "token:bob") || slices.ContainsFunc(bobSessions, func(id string) bool { return strings.Contains(text, id) })
	}
	status, own := s.admin(t, aliceToken, "/status/")
	if status != 200 || !strings.Contains(string(own), `"identity":"token:alice"`) || showsBob(string(own)) ||
		!strings.Contains(string(own), `"viewer":"token:alice"`) || strings.Contains(string(own), aliceToken) {
		t.Errorf("alice's own /status/: %d %.600s", status, own)
	}
	// The page in headless Chromium, as the operator logs in: each session
	// and audit entry names its identity.
	if _, err := exec.LookPath("chromium"); err == nil {
		chromium := findChromium(t)
		dom := dumpDOM(t, chromium, s.base+"/status?token="+opsToken)
		for _, want := range []string{`data-col="identity">token:alice<`, `data-col="identity">token:bob<`} {
			if !strings.Contains(dom, want) {
				t.Errorf("the status page in Chromium lacks %s", want)
			}
		}
		if strings.Contains(dom, opsToken) || strings.Contains(dom, aliceToken) {
			t.Error("the status page shows a token")
		}
		// Alice logs in to the page: her session and calls, nothing of
		// bob's, and no server-wide section.
		dom = dumpDOM(t, chromium, s.base+"/status?token="+aliceToken)
		for _, want := range []string{`data-col="identity">token:alice<`, `id="viewer-name" class="mono">token:alice<`} {
			if !strings.Contains(dom, want) {
				t.Errorf("alice's status page in Chromium lacks %s:\n%s", want, dom)
			}
		}
		if showsBob(dom) || strings.Contains(dom, aliceToken) {
			t.Errorf("alice's status page in Chromium shows bob's or a token:\n%s", dom)
		}
		if !regexp.MustCompile(`<section id="trends"[^>]* hidden`).MatchString(dom) ||
			!regexp.MustCompile(`<section id="downstreams-section"[^>]* hidden`).MatchString(dom) {
			t.Errorf("alice's status page shows the server-wide sections:\n%s", dom)
		}
	}

	// The audit log names each caller, never its token.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(s.auditLog)
		log := string(b)
		if strings.Contains(log, `"identity":"token:alice","tool":"shell.exec"`) &&
			strings.Contains(log, `"identity":"token:bob","tool":"repo.readFile"`) {
			if strings.Contains(log, aliceToken) || strings.Contains(log, bobToken) {
				t.Error("the audit log holds a token")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log does not name alice's and bob's calls:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(s.log.String(), aliceToken) || strings.Contains(s.log.String(), bobToken) {
		t.Error("troupe's log holds a token")
	}
	if !strings.Contains(s.log.String(), "identity=token:alice") {
		t.Error("no log line names alice")
	}
}

// A reload that removes a token ends its holder's sessions (the log says
// so, and the session is gone) and leaves the other tokens' sessions.
func TestReloadRemovingATokenEndsItsSessions(t *testing.T) {
	fx := newFixture(t)
	s := startIdentityServer(t, fx)
	alice, bob := s.session(t, aliceToken), s.session(t, bobToken)

	cfg := filepath.Join(fx.root, "troupe.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	without := strings.Replace(string(b), "[[auth.tokens]]\nname = \"alice\"\ntoken_env = \"E2E_ALICE_TOKEN\"\nallow_tools = [\"repo.*\", \"shell.exec\"]\n", "", 1)
	if without == string(b) {
		t.Fatal("alice's entry not found in the config")
	}
	if err := os.WriteFile(cfg, []byte(without), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !s.waitLog("reload: ended the sessions of tokens it removed sessions=1", 10*time.Second) {
		t.Fatalf("no log of alice's session ending:\n%s", s.log)
	}
	if !s.waitLog("http session ended: its identity may no longer call", time.Second) || !strings.Contains(s.log.String(), "identity=token:alice") {
		t.Errorf("the log does not name alice's ended session")
	}
	if status, _, _ := s.as(t, aliceToken, alice, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, false, "", ""); status != 401 {
		t.Errorf("alice's token after the reload: %d, want 401", status)
	}
	if status, m := s.asJSON(t, bobToken, bob, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, false, "", ""); status != 200 || m["error"] != nil {
		t.Errorf("bob's session after the reload: %d %v", status, m)
	}
	if strings.Contains(s.log.String(), aliceToken) {
		t.Error("the log holds alice's token")
	}
}

// grepLines is the lines of text that contain substr, for a failure's
// message.
func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
