package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// limitsSession speaks JSON-RPC to a troupe over HTTP, as one client of
// the token's identity.
type limitsSession struct {
	t   *testing.T
	srv *httpServer
	id  string // Mcp-Session-Id, "" before initialize
}

// post sends body (in the session, if any) and returns the status, the
// headers and the decoded answer.
func (c *limitsSession) post(body string, extra map[string]string) (int, http.Header, map[string]any) {
	c.t.Helper()
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	if c.id != "" {
		h["Mcp-Session-Id"] = c.id
	}
	for k, v := range extra {
		h[k] = v
	}
	resp := c.srv.request(c.t, http.MethodPost, strings.NewReader(body), h)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("answer is not JSON: %d %q", resp.StatusCode, b)
		}
	}
	return resp.StatusCode, resp.Header, m
}

// initialize opens a session; it returns the status and answer of a
// refused one (the session id stays "").
func (c *limitsSession) initialize() (int, http.Header, map[string]any) {
	c.t.Helper()
	c.id = ""
	status, hdr, m := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"troupe-e2e-limits","version":"0"}}}`, nil)
	if status == http.StatusOK {
		c.id = hdr.Get("Mcp-Session-Id")
		c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	}
	return status, hdr, m
}

// call calls tool with arguments it accepts (echo's text, repo.*'s path).
func (c *limitsSession) call(id int, tool string) (int, http.Header, map[string]any) {
	c.t.Helper()
	args := map[string]string{"echo": `{"text":"hi"}`, "repo.listDir": `{"path":"."}`, "repo.readFile": `{"path":"README.md"}`}[tool]
	if args == "" {
		args = "{}"
	}
	status, hdr, m := c.post(`{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`, nil)
	if r, _ := m["result"].(map[string]any); r != nil && r["isError"] == true {
		c.t.Fatalf("%s failed: %v", tool, m)
	}
	return status, hdr, m
}

func (c *limitsSession) end() {
	c.t.Helper()
	resp := c.srv.request(c.t, http.MethodDelete, nil, map[string]string{"Mcp-Session-Id": c.id})
	resp.Body.Close()
	c.id = ""
}

// wantRateLimited checks a -31429 answer: kind rate_limited, a
// retryAfterSeconds, a correlation id, and a message naming the setting
// (key); over HTTP status 429 it also checks Retry-After agrees.
func wantRateLimited(t *testing.T, what string, status int, hdr http.Header, m map[string]any, wantStatus int, key string) int {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	if status != wantStatus || e == nil || e["code"] != -31429.0 {
		t.Fatalf("%s: want %d with error -31429, got %d %v", what, wantStatus, status, m)
	}
	d, _ := e["data"].(map[string]any)
	retry, _ := d["retryAfterSeconds"].(float64)
	if d["kind"] != "rate_limited" || retry < 1 || d["correlationId"] == nil {
		t.Fatalf("%s: error data %v", what, d)
	}
	if msg, _ := e["message"].(string); !strings.Contains(msg, key) || !strings.Contains(msg, "token:default") {
		t.Fatalf("%s: message %q does not name the identity and %s", what, msg, key)
	}
	if wantStatus == http.StatusTooManyRequests && hdr.Get("Retry-After") != strconv.Itoa(int(retry)) {
		t.Fatalf("%s: Retry-After %q, data says %v", what, hdr.Get("Retry-After"), retry)
	}
	return int(retry)
}

// TestIdentityLimits: the limits of [limits.rate] and [limits.identity]
// hold for the identity behind the token ("default"), not for a session:
// the N+1th call in a minute is refused with -31429 and retryAfterSeconds,
// a second session is 429, and a new session after the first ended has
// no new calls; a 2026-07-28 call is 429 with Retry-After.
func TestIdentityLimits(t *testing.T) {
	fx := newFixture(t)
	token := newToken(t)
	srv := startHTTPServer(t, fx.dir, token, "-c", "tools.benchmark_echo=true",
		"-c", "limits.rate.calls_per_minute=3", "-c", "limits.identity.max_sessions=1")
	c := &limitsSession{t: t, srv: srv}
	if status, _, m := c.initialize(); status != 200 {
		t.Fatalf("initialize: %d %v", status, m)
	}
	for i := range 5 { // tools/list does not count
		if status, _, m := c.post(`{"jsonrpc":"2.0","id":`+strconv.Itoa(100+i)+`,"method":"tools/list"}`, nil); status != 200 || m["error"] != nil {
			t.Fatalf("tools/list: %d %v", status, m)
		}
	}
	for i := range 3 {
		if status, _, m := c.call(i+1, "echo"); status != 200 || m["error"] != nil {
			t.Fatalf("call %d: %d %v", i+1, status, m)
		}
	}
	status, hdr, m := c.call(4, "echo")
	if retry := wantRateLimited(t, "4th call", status, hdr, m, http.StatusOK, "limits.rate.calls_per_minute"); retry > 20 {
		t.Fatalf("retryAfterSeconds %d, want at most 20 (3 per minute)", retry)
	}

	// A second session of the same identity: 429, not a way around.
	other := &limitsSession{t: t, srv: srv}
	status, hdr, m = other.initialize()
	wantRateLimited(t, "second session", status, hdr, m, http.StatusTooManyRequests, "limits.identity.max_sessions")

	// Once the first has ended, a new session opens, and has no new calls.
	c.end()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _, m = c.initialize()
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session after the first ended: %d %v", status, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	status, hdr, m = c.call(5, "echo")
	wantRateLimited(t, "call in a new session", status, hdr, m, http.StatusOK, "limits.rate.calls_per_minute")

	// 2026-07-28: no session, the same identity, 429 before anything runs.
	modern := &limitsSession{t: t, srv: srv}
	status, hdr, m = modern.post(modernRequest("6", "tools/call", `"name":"echo","arguments":{"text":"hi"}`),
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
	wantRateLimited(t, "2026-07-28 call", status, hdr, m, http.StatusTooManyRequests, "limits.rate.calls_per_minute")
	if !srv.waitLog("rate limited", 5*time.Second) {
		t.Fatal("the log does not mention the refusals")
	}
	// /metrics counts the refusals by identity and limit.
	families := scrape(t, srv)
	if got := counter(families, "troupe_rate_limited_total", map[string]string{"identity": "token:default", "limit": "calls_per_minute"}); got != 3 {
		t.Errorf("troupe_rate_limited_total{token:default,calls_per_minute} = %v, want 3", got)
	}
	if got := counter(families, "troupe_rate_limited_total", map[string]string{"identity": "token:default", "limit": "max_sessions"}); got < 1 {
		t.Errorf("troupe_rate_limited_total{token:default,max_sessions} = %v, want at least 1", got)
	}
}

// TestIdentityToolAndConcurrencyLimits: a [limits.rate.tools] glob bounds
// the tools it matches and no others; max_concurrent_calls refuses a call
// while another runs (not queued) and allows one once it has ended.
func TestIdentityToolAndConcurrencyLimits(t *testing.T) {
	fx := newFixture(t)
	token := newToken(t)
	cfg := filepath.Join(t.TempDir(), "troupe.toml")
	if err := os.WriteFile(cfg, []byte(`
[tools]
benchmark_echo = true

[limits.rate.tools]
"repo.*" = 1

[limits.identity]
max_concurrent_calls = 1

[mcp.slow]
description = "Takes a while."
command = "sleep"
args = ["2"]
side_effects = []
requires_approval = false
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startHTTPServer(t, fx.dir, token, "--config", cfg)
	c := &limitsSession{t: t, srv: srv}
	if status, _, m := c.initialize(); status != 200 {
		t.Fatalf("initialize: %d %v", status, m)
	}
	if status, _, m := c.call(1, "repo.listDir"); status != 200 || m["error"] != nil {
		t.Fatalf("repo.listDir: %d %v", status, m)
	}
	status, hdr, m := c.call(2, "repo.readFile")
	wantRateLimited(t, "second repo.* call", status, hdr, m, http.StatusOK, `limits.rate.tools."repo.*"`)
	for i := range 3 {
		if status, _, m := c.call(3+i, "echo"); status != 200 || m["error"] != nil {
			t.Fatalf("echo %d beside the repo.* limit: %d %v", i, status, m)
		}
	}

	// The slow call holds the identity's one slot: a call meanwhile, even
	// from another session, is refused at once.
	slow := make(chan map[string]any, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.url,
			strings.NewReader(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"slow","arguments":{}}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Mcp-Session-Id", c.id)
		var m map[string]any
		if resp, err := loopbackClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
		}
		slow <- m
	}()
	other := &limitsSession{t: t, srv: srv}
	if status, _, m := other.initialize(); status != 200 {
		t.Fatalf("second session: %d %v", status, m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, hdr, m := other.call(11, "echo")
		if status == 200 && m["error"] != nil {
			began := time.Now()
			wantRateLimited(t, "call beside the slow one", status, hdr, m, http.StatusOK, "limits.identity.max_concurrent_calls")
			if time.Since(began) > time.Second {
				t.Fatal("the refusal waited")
			}
			break
		}
		// The slow call may not have started yet.
		if time.Now().After(deadline) {
			t.Fatalf("no call was refused while the slow one ran: %d %v", status, m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case m := <-slow:
		if m == nil || m["error"] != nil {
			t.Fatalf("the slow call: %v", m)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the slow call did not answer")
	}
	if status, _, m := other.call(12, "echo"); status != 200 || m["error"] != nil {
		t.Fatalf("a call after the slow one ended: %d %v", status, m)
	}
}

// TestBenchCountsRateLimitedCalls: `troupe bench` against a troupe with a
// rate limit reports the refused calls as rate limited, not as errors, in
// its table and its JSON.
func TestBenchCountsRateLimitedCalls(t *testing.T) {
	fx := newFixture(t)
	token := newToken(t)
	srv := startHTTPServer(t, fx.dir, token, "-c", "tools.benchmark_echo=true", "-c", "limits.rate.calls_per_minute=10")
	auth := []string{tokenEnv + "=" + token}
	code, out, errText := runBench(t, auth, "--http", srv.url, "--calls", "30", "--concurrency", "2",
		"--bearer-token-env", tokenEnv)
	if code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errText)
	}
	if !tableRow(out, "rate limited", "20 ") || !tableRow(out, "errors", "none") || !strings.Contains(out, "(10 ok)") {
		t.Fatalf("want 10 ok, 20 rate limited and no errors:\n%s", out)
	}
	code, out, errText = runBench(t, auth, "--stateless", "--http", srv.url, "--calls", "5", "--bearer-token-env", tokenEnv, "--json")
	if code != 0 {
		t.Fatalf("stateless: exit %d, stdout %q, stderr %q", code, out, errText)
	}
	for _, want := range []string{`"rate_limited": 5`, `"ok": 0`, `"errors": {}`} {
		if !strings.Contains(out, want) {
			t.Errorf("stateless JSON report without %s:\n%s", want, out)
		}
	}
}

// tableRow reports whether the bench table has a row name whose value
// starts with value.
func tableRow(table, name, value string) bool {
	for line := range strings.Lines(table) {
		if rest, ok := strings.CutPrefix(line, name); ok && strings.HasPrefix(strings.TrimSpace(rest), value) {
			return true
		}
	}
	return false
}

// TestNamedTokensHaveTheirOwnLimits: two [[auth.tokens]] identities; the
// one with its own rate is refused past it, naming its token's setting,
// while the other keeps the server's limit and is not touched by the
// first one's calls.
func TestNamedTokensHaveTheirOwnLimits(t *testing.T) {
	fx := newFixture(t)
	ciToken, devToken := newToken(t), newToken(t)
	t.Setenv("LIMITS_CI_TOKEN", ciToken)
	t.Setenv("LIMITS_DEV_TOKEN", devToken)
	cfg := filepath.Join(t.TempDir(), "troupe.toml")
	if err := os.WriteFile(cfg, []byte(`
[tools]
benchmark_echo = true

[limits.rate]
calls_per_minute = 3

[[auth.tokens]]
name = "ci"
token_env = "LIMITS_CI_TOKEN"
rate = { calls_per_minute = 1 }

[[auth.tokens]]
name = "dev"
token_env = "LIMITS_DEV_TOKEN"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startHTTPServer(t, fx.dir, "", "--config", cfg)
	ci := &limitsSession{t: t, srv: &httpServer{url: srv.url, token: ciToken}}
	dev := &limitsSession{t: t, srv: &httpServer{url: srv.url, token: devToken}}
	for _, c := range []*limitsSession{ci, dev} {
		if status, _, m := c.initialize(); status != 200 {
			t.Fatalf("initialize: %d %v", status, m)
		}
	}
	if status, _, m := ci.call(1, "echo"); status != 200 || m["error"] != nil {
		t.Fatalf("ci's first call: %d %v", status, m)
	}
	status, _, m := ci.call(2, "echo")
	e, _ := m["error"].(map[string]any)
	if msg, _ := e["message"].(string); status != 200 || e["code"] != -31429.0 || !strings.Contains(msg, "token:ci") ||
		!strings.Contains(msg, `auth.tokens[name="ci"].rate.calls_per_minute`) {
		t.Fatalf("ci's second call: want -31429 naming its token's own setting, got %d %v", status, m)
	}
	for i := range 3 {
		if status, _, m := dev.call(10+i, "echo"); status != 200 || m["error"] != nil {
			t.Fatalf("dev's call %d (ci's limit must not touch it): %d %v", i+1, status, m)
		}
	}
	status, _, m = dev.call(13, "echo")
	e, _ = m["error"].(map[string]any)
	if msg, _ := e["message"].(string); e["code"] != -31429.0 || !strings.Contains(msg, "token:dev") ||
		!strings.Contains(msg, "limits.rate.calls_per_minute") {
		t.Fatalf("dev's 4th call: want -31429 under the server's limit, got %d %v", status, m)
	}
}
