package e2e

// The gateway methods for a 2026-07-28 client (raw JSON-RPC, no
// initialize): server-everything's prompts and completions through troupe,
// with the era's own result members, [prompts] deny applied, and the
// capabilities declared to both eras.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// withoutHop is a 2026-07-28 result without the members troupe's hop adds
// (resultType, _meta, the cache hint), as JSON.
func withoutHop(t *testing.T, res map[string]any) string {
	t.Helper()
	for _, k := range []string{"resultType", "_meta", "ttlMs", "cacheScope"} {
		delete(res, k)
	}
	b, _ := json.Marshal(res)
	return string(b)
}

func TestGatewayPromptsStateless(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	cfg := downstreamConfig(t, "[prompts]\ndeny = [\"everything.args-prompt\"]\n\n"+
		stdioServerTable("everything", command, args, "requires_approval = false"))
	fx := newFixture(t)
	s := startServer(t, fx.dir, "--config", cfg)

	s.send(modernRequest(`"d"`, "server/discover", ""))
	caps, _ := checkModernResult(t, "server/discover", s.recv())["capabilities"].(map[string]any)
	if caps["prompts"] == nil || caps["completions"] == nil {
		t.Errorf("server/discover declares %v, want prompts and completions", caps)
	}

	s.send(modernRequest("1", "prompts/list", ""))
	res := checkModernResult(t, "prompts/list", s.recv())
	var names []string
	for _, p := range res["prompts"].([]any) {
		names = append(names, p.(map[string]any)["name"].(string))
	}
	want := []string{"everything.simple-prompt", "everything.resource-prompt", "everything.completable-prompt"}
	// A session-based server gives no cache hint: the page is not to be
	// cached (ttlMs 0), and nothing in it is private.
	if len(names) != len(want) || res["cacheScope"] != "public" || res["ttlMs"] != 0.0 {
		t.Errorf("prompts/list: %q (ttlMs %v, cacheScope %v), want %q, 0, public", names, res["ttlMs"], res["cacheScope"], want)
	}
	for _, n := range want {
		found := false
		for _, m := range names {
			found = found || m == n
		}
		if !found {
			t.Errorf("prompts/list lacks %s: %q", n, names)
		}
	}

	s.send(modernRequest("2", "prompts/get", `"name":"everything.simple-prompt"`))
	gotPrompt := withoutHop(t, checkModernResult(t, "prompts/get", s.recv()))
	s.send(modernRequest("3", "completion/complete",
		`"ref":{"type":"ref/prompt","name":"everything.completable-prompt"},"argument":{"name":"department","value":"S"}`))
	gotCompletion := withoutHop(t, checkModernResult(t, "completion/complete", s.recv()))
	direct := runScenario(t, scenario{Transport: transport{Kind: "stdio", Command: command, Args: args}, Steps: []step{
		{Op: "getPrompt", Name: "simple-prompt"},
		{Op: "complete", Ref: map[string]any{"type": "ref/prompt", "name": "completable-prompt"},
			Argument: map[string]any{"name": "department", "value": "S"}},
	}})
	if !jsonEqual(gotPrompt, string(direct.Steps[0].Result)) {
		t.Errorf("prompts/get:\n via    %s\n direct %s", gotPrompt, direct.Steps[0].Result)
	}
	if !jsonEqual(gotCompletion, string(direct.Steps[1].Result)) {
		t.Errorf("completion/complete:\n via    %s\n direct %s", gotCompletion, direct.Steps[1].Result)
	}

	// A denied prompt is unknown; a malformed ref says what is wrong.
	s.send(modernRequest("4", "prompts/get", `"name":"everything.args-prompt","arguments":{"city":"x"}`))
	if code, _ := errorCode(t, s.recv()); code != -32602 {
		t.Errorf("a denied prompt: code %v, want -32602", code)
	}
	s.send(modernRequest("5", "completion/complete", `"ref":{"type":"ref/nothing"},"argument":{"name":"a","value":""}`))
	if code, _ := errorCode(t, s.recv()); code != -32602 {
		t.Errorf("a bad ref: code %v, want -32602", code)
	}

	// Resources: the server's, read through troupe; a URI nobody has is
	// -32602 in this era.
	s.send(modernRequest("6", "resources/list", ""))
	listed, _ := json.Marshal(checkModernResult(t, "resources/list", s.recv()))
	if !strings.Contains(string(listed), `"uri":"demo://resource/static/document/architecture.md"`) {
		t.Errorf("resources/list lacks the server's resources: %s", listed)
	}
	s.send(modernRequest("7", "resources/read", `"uri":"demo://resource/static/document/architecture.md"`))
	read := checkModernResult(t, "resources/read", s.recv())
	if c, _ := read["contents"].([]any); len(c) != 1 || c[0].(map[string]any)["text"] == "" {
		t.Errorf("resources/read: %v", read)
	}
	s.send(modernRequest("8", "resources/read", `"uri":"demo://nowhere/1"`))
	if code, _ := errorCode(t, s.recv()); code != -32602 {
		t.Errorf("reading a URI nobody has: code %v, want -32602", code)
	}

	// A handshake session on the same process sees the same capabilities.
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	init, _ := s.recv()["result"].(map[string]any)
	caps, _ = init["capabilities"].(map[string]any)
	if caps["prompts"] == nil || caps["completions"] == nil {
		t.Errorf("initialize declares %v, want prompts and completions", caps)
	}
}

// TestGatewayNotDeclaredWithoutServers: with no downstream server
// configured, troupe declares neither prompts nor completions, and the
// methods are not found, as before.
func TestGatewayNotDeclaredWithoutServers(t *testing.T) {
	fx := newFixture(t)
	s := startServer(t, fx.dir)
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	init, _ := s.recv()["result"].(map[string]any)
	caps, _ := init["capabilities"].(map[string]any)
	if caps["prompts"] != nil || caps["completions"] != nil {
		t.Errorf("initialize declares %v without servers", caps)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`)
	if code, _ := errorCode(t, s.recv()); code != -32601 {
		t.Errorf("prompts/list without servers: code %v, want -32601", code)
	}
}

// TestGatewayPromptNameHeader: over HTTP, a 2026-07-28 prompts/get whose
// Mcp-Name header names another prompt than its params is refused with
// -32020, as tools/call is.
func TestGatewayPromptNameHeader(t *testing.T) {
	fx := newFixture(t)
	cfg := downstreamConfig(t, "[mcp_servers.broken]\ncommand = \"false\"\n\n[limits]\nmcp_servers_startup_wait = \"0s\"\n")
	srv := startHTTPServer(t, fx.dir, "", "--config", cfg)
	post := func(headerName, name string) (int, map[string]any) {
		t.Helper()
		resp := srv.request(t, http.MethodPost, strings.NewReader(modernRequest("1", "prompts/get", `"name":"`+name+`"`)),
			map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": headerName})
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	if status, m := post("broken.a", "broken.b"); status != http.StatusBadRequest {
		t.Errorf("a mismatched Mcp-Name: %d %v, want 400 -32020", status, m)
	} else if code, _ := errorCode(t, m); code != -32020 {
		t.Errorf("a mismatched Mcp-Name: code %v, want -32020", code)
	}
	// The header agrees: the request reaches the gateway, which has no
	// such prompt (the server never starts).
	if _, m := post("broken.a", "broken.a"); m["error"] == nil {
		t.Errorf("an unknown prompt: %v", m)
	} else if code, _ := errorCode(t, m); code != -32602 {
		t.Errorf("an unknown prompt: code %v, want -32602", code)
	}
}
