package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A message that names a member twice reads differently to different
// decoders: encoding/json takes the last of exact duplicates and matches
// struct fields case-insensitively, while a map lookup sees one exact key.
// troupe once checked 2026-07-28's Mcp-Name header against params.name by
// map and ran the tool its session decoded by struct, so a body with
// "name" and "NAME" ran a tool the header did not name. These tests send
// exactly that to the real binary and check nothing runs.

// secretToolConfig declares secretcmd, a command tool that needs no
// approval and writes marker (profile none: no sandbox keeps it from the
// marker's directory), and greet, a harmless one whose output a resource
// read can reach.
func secretToolConfig(t *testing.T, marker string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.toml")
	cfg := fmt.Sprintf(`
[mcp.secretcmd]
command = "sh"
args = ["-c", "echo ran > %s"]
description = "Writes a marker: it must only run when called by its name."
sandbox_profile = "none"
side_effects = []
requires_approval = false

[mcp.greet]
command = "echo"
args = ["hello-from-greet"]
description = "Greets."
side_effects = []
requires_approval = false
`, marker)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// assertDuplicateRefused checks m is a JSON-RPC error with code that names
// the duplicated member and its other spelling.
func assertDuplicateRefused(t *testing.T, what string, m map[string]any, code float64, member, other string) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("%s: want an error, got %v", what, m)
	}
	msg, _ := e["message"].(string)
	want := `duplicate member "` + member + `"`
	if other != "" {
		want += ` (also as "` + other + `")`
	}
	if e["code"] != code || !strings.Contains(msg, want) {
		t.Fatalf("%s: want %v naming %s, got %v", what, code, want, e)
	}
}

// assertNotRun checks the marker was not written, a moment after the
// answer (a call that ran would have written it before answering).
func assertNotRun(t *testing.T, marker string) {
	t.Helper()
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("secretcmd ran: the marker exists (%v)", err)
	}
}

func TestDuplicateMembersOverHTTPModern(t *testing.T) {
	fx := newFixture(t)
	marker := filepath.Join(t.TempDir(), "secretcmd-ran")
	t.Setenv("TROUPE_CONFIG", secretToolConfig(t, marker)) // the server inherits it
	srv := startHTTPServer(t, fx.dir, "")
	post := func(body string, headers map[string]string) (int, map[string]any) {
		t.Helper()
		h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28"}
		for k, v := range headers {
			h[k] = v
		}
		resp := srv.request(t, http.MethodPost, strings.NewReader(body), h)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("answer is not JSON: %d %q", resp.StatusCode, b)
		}
		return resp.StatusCode, m
	}

	// The attack: the header and the first "name" say repo.listDir, the
	// case variant says secretcmd.
	listDir := map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "repo.listDir"}
	status, m := post(modernRequest("1", "tools/call", `"name":"repo.listDir","NAME":"secretcmd","arguments":{}`), listDir)
	assertNotRun(t, marker)
	if status != http.StatusBadRequest {
		t.Errorf("name/NAME: status %d, want 400", status)
	}
	assertDuplicateRefused(t, "name/NAME", m, -32602, "name", "NAME")

	// The same with an exact duplicate, and with the variant first.
	_, m = post(modernRequest("2", "tools/call", `"name":"repo.listDir","name":"secretcmd"`), listDir)
	assertNotRun(t, marker)
	assertDuplicateRefused(t, "name twice", m, -32602, "name", "")
	_, m = post(modernRequest("3", "tools/call", `"Name":"secretcmd","name":"repo.listDir"`), listDir)
	assertNotRun(t, marker)
	assertDuplicateRefused(t, "Name/name", m, -32602, "Name", "name")

	// Without a duplicate: "NAME" alone is the name the session reads, and
	// the header is compared with it, so an empty Mcp-Name (its encoded
	// form) does not let it through.
	status, m = post(modernRequest("31", "tools/call", `"NAME":"secretcmd"`),
		map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "=?base64??="})
	assertNotRun(t, marker)
	if code, _ := errorCode(t, m); status != http.StatusBadRequest || code != -32020 {
		t.Fatalf("NAME with an empty Mcp-Name: %d %v", status, m)
	}

	// _meta is troupe's too: a second spelling of the version is refused.
	_, m = post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo.listDir",`+
		modernMetaJSON[:len(modernMetaJSON)-1]+`,"io.modelcontextprotocol/protocolversion":"2025-06-18"}}}`, listDir)
	assertDuplicateRefused(t, "_meta variant", m, -32602, "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/protocolversion")
	// ... and the envelope: two methods.
	_, m = post(`{"jsonrpc":"2.0","id":5,"method":"tools/list","METHOD":"tools/call","params":{"name":"secretcmd",`+modernMetaJSON+`}}`,
		map[string]string{"Mcp-Method": "tools/list"})
	assertNotRun(t, marker)
	assertDuplicateRefused(t, "method/METHOD", m, -32600, "method", "METHOD")

	// A tool's arguments may hold case variants (a downstream's schema can
	// have both id and ID), but never the same name twice.
	_, m = post(modernRequest("6", "tools/call", `"name":"repo.listDir","arguments":{"path":".","path":"src"}`), listDir)
	assertDuplicateRefused(t, "arguments", m, -32602, "path", "")

	// The call the header names still runs.
	status, m = post(modernRequest("7", "tools/call", `"name":"repo.listDir","arguments":{}`), listDir)
	if status != 200 {
		t.Fatalf("repo.listDir: %d %v", status, m)
	}
	checkModernResult(t, "repo.listDir", m)

	// resources/read: greet's output is the caller's; a read whose header
	// and first "uri" name another resource must not return it.
	status, m = post(modernRequest("8", "tools/call", `"name":"greet"`), map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "greet"})
	checkModernResult(t, "greet", m)
	_, m = post(modernRequest("9", "resources/list", ""), map[string]string{"Mcp-Method": "resources/list"})
	res := checkModernResult(t, "resources/list", m)
	list, _ := res["resources"].([]any)
	if len(list) == 0 {
		t.Fatalf("greet left no output resource: %v", m)
	}
	uri := list[0].(map[string]any)["uri"].(string)
	decoy := "troupe://output/decoy/stdout"
	read := map[string]string{"Mcp-Method": "resources/read", "Mcp-Name": decoy}
	status, m = post(modernRequest("10", "resources/read", `"uri":"`+decoy+`","URI":"`+uri+`"`), read)
	if strings.Contains(fmt.Sprint(m), "hello-from-greet") {
		t.Fatalf("uri/URI read the resource the header did not name: %v", m)
	}
	if status != http.StatusBadRequest {
		t.Errorf("uri/URI: status %d, want 400", status)
	}
	assertDuplicateRefused(t, "uri/URI", m, -32602, "uri", "URI")
	status, m = post(modernRequest("10", "resources/read", `"URI":"`+uri+`"`),
		map[string]string{"Mcp-Method": "resources/read", "Mcp-Name": "=?base64??="})
	if strings.Contains(fmt.Sprint(m), "hello-from-greet") {
		t.Fatalf("URI with an empty Mcp-Name read the resource: %v", m)
	}
	if code, _ := errorCode(t, m); status != http.StatusBadRequest || code != -32020 {
		t.Fatalf("URI with an empty Mcp-Name: %d %v", status, m)
	}
	// The header alone still guards the one uri.
	status, m = post(modernRequest("11", "resources/read", `"uri":"`+uri+`"`), read)
	if code, _ := errorCode(t, m); status != 400 || code != -32020 {
		t.Fatalf("uri with another Mcp-Name: %d %v", status, m)
	}
	_, m = post(modernRequest("12", "resources/read", `"uri":"`+uri+`"`),
		map[string]string{"Mcp-Method": "resources/read", "Mcp-Name": uri})
	if !strings.Contains(fmt.Sprint(checkModernResult(t, "resources/read", m)), "hello-from-greet") {
		t.Fatalf("resources/read of greet's output: %v", m)
	}
	assertNotRun(t, marker)
}

// TestDuplicateMembersOverHTTPSession: a session-based HTTP client gets
// the same refusal; the session goes on serving.
func TestDuplicateMembersOverHTTPSession(t *testing.T) {
	fx := newFixture(t)
	marker := filepath.Join(t.TempDir(), "secretcmd-ran")
	t.Setenv("TROUPE_CONFIG", secretToolConfig(t, marker))
	srv := startHTTPServer(t, fx.dir, "")
	resp, body := postInitialize(t, srv, "")
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp := srv.request(t, http.MethodPost, strings.NewReader(body), map[string]string{
			"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"})
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if len(b) > 0 {
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("answer is not JSON: %d %q", resp.StatusCode, b)
			}
		}
		return resp.StatusCode, m
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	status, m := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"repo.listDir","NAME":"secretcmd"}}`)
	assertNotRun(t, marker)
	if status != http.StatusBadRequest {
		t.Errorf("status %d, want 400", status)
	}
	assertDuplicateRefused(t, "name/NAME", m, -32602, "name", "NAME")
	if _, m = post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); m["error"] != nil || m["result"] == nil {
		t.Fatalf("ping after the refusal: %v", m)
	}
}

func TestDuplicateMembersOverStdio(t *testing.T) {
	fx := newFixture(t)
	marker := filepath.Join(t.TempDir(), "secretcmd-ran")
	s := startServer(t, fx.dir, "--config", secretToolConfig(t, marker))
	s.initialize("2025-11-25")
	for i, tc := range []struct {
		line          string
		code          float64
		member, other string
	}{
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"repo.listDir","name":"secretcmd"}}`, -32602, "name", ""},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"repo.listDir","NAME":"secretcmd"}}`, -32602, "name", "NAME"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"secretcmd","_meta":{"progressToken":1,"progressToken":2}}}`, -32602, "progressToken", ""},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"secretcmd","arguments":{"a":{"b":1,"b":2}}}}`, -32602, "b", ""},
		{`{"jsonrpc":"2.0","id":2,"id":3,"method":"tools/call","params":{"name":"secretcmd"}}`, -32600, "id", ""},
	} {
		s.send(tc.line)
		m := s.recv()
		assertDuplicateRefused(t, fmt.Sprint("line ", i), m, tc.code, tc.member, tc.other)
	}
	assertNotRun(t, marker)
	// 2026-07-28 over stdio too.
	s.send(modernRequest("4", "tools/call", `"name":"repo.listDir","NAME":"secretcmd"`))
	assertDuplicateRefused(t, "modern name/NAME", s.recv(), -32602, "name", "NAME")
	assertNotRun(t, marker)
	// The session goes on; the tool runs when named once.
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"secretcmd"}}`)
	if m := s.recv(); m["result"] == nil {
		t.Fatalf("secretcmd by its name: %v", m)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("secretcmd called by its name did not run: %v", err)
	}
}
