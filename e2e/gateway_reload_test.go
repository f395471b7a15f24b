package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestGatewayDeclaredAfterReload: a configuration without downstream
// servers declares no prompts; a reload that adds one makes the sessions
// that start afterwards (initialize over HTTP, and a 2026-07-28
// server/discover) declare prompts and completions, and prompts/list is
// served instead of being -32601, without a restart.
func TestGatewayDeclaredAfterReload(t *testing.T) {
	fx := newFixture(t)
	cfg := downstreamConfig(t, "[limits]\nmcp_servers_startup_wait = \"0s\"\n")
	srv := startHTTPServer(t, fx.dir, "", "--config", cfg)
	initCaps := func() map[string]any {
		t.Helper()
		resp, body := postInitialize(t, srv, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		text := string(body)
		if i := strings.Index(text, "data: "); i >= 0 { // an SSE answer
			text = strings.TrimSpace(strings.SplitN(text[i+len("data: "):], "\n", 2)[0])
		}
		var m struct {
			Result struct {
				Capabilities map[string]any `json:"capabilities"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			t.Fatalf("initialize: %v: %s", err, body)
		}
		return m.Result.Capabilities
	}
	modern := func(method string) map[string]any {
		t.Helper()
		resp := srv.request(t, http.MethodPost, strings.NewReader(modernRequest("1", method, "")),
			map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method})
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v: %s", method, err, b)
		}
		return m
	}
	if caps := initCaps(); caps["prompts"] != nil || caps["completions"] != nil {
		t.Fatalf("initialize declares %v without servers", caps)
	}

	if err := os.WriteFile(cfg, []byte("[mcp_servers.broken]\ncommand = \"false\"\n\n[limits]\nmcp_servers_startup_wait = \"0s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !srv.waitLog("configuration reloaded", 10*time.Second) {
		t.Fatal("the edit was not reloaded")
	}
	if caps := initCaps(); caps["prompts"] == nil || caps["completions"] == nil {
		t.Errorf("initialize after the reload declares %v, want prompts and completions", caps)
	}
	discover := modern("server/discover")
	res, _ := discover["result"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	if caps["prompts"] == nil || caps["completions"] == nil {
		t.Errorf("server/discover after the reload: %v, want prompts and completions", discover)
	}
	if m := modern("prompts/list"); m["error"] != nil {
		t.Errorf("prompts/list after the reload: %v", m)
	}
}
