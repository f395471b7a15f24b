package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Codex's former management methods, served by troupe beside MCP on the
// same connection, driven as the clients of `codex mcp serve` drove them:
// raw JSON-RPC lines over stdio.

// callAnswering sends a request and returns its response; every request
// troupe sends meanwhile (an approval) is answered with answer's value.
func (s *lineServer) callAnswering(id int, method string, params any, answer func(req map[string]any) any) map[string]any {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		s.t.Fatal(err)
	}
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("troupe closed stdout while waiting for %s", method)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				s.t.Fatalf("not JSON: %q", l)
			}
			switch {
			case m["method"] != nil && m["id"] != nil:
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": answer(m)})
				if _, err := s.in.Write(append(b, '\n')); err != nil {
					s.t.Fatal(err)
				}
			case m["id"] == float64(id) && m["method"] == nil:
				return m
			}
		case <-time.After(30 * time.Second):
			s.t.Fatalf("no answer to %s", method)
		}
	}
}

// TestExecOneOffCommandNeedsApproval: execOneOffCommand asks a person
// through troupe's gate (the old server never asked), answers the old
// shape when approved — in the old servers' answer form too — and runs
// nothing when declined; a client's danger-full-access still gets
// troupe's sandbox.
func TestExecOneOffCommandNeedsApproval(t *testing.T) {
	ws := t.TempDir()
	s := startLineServer(t, ws, "-c", "codex.enabled=false")
	params := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "orchestrator", "version": "1"}}
	if m := s.call(0, "initialize", params); m["error"] != nil {
		t.Fatalf("initialize: %v", m)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	s.in.Write(append(b, '\n'))

	var asked []string
	approve := func(form any) func(map[string]any) any {
		return func(req map[string]any) any {
			p, _ := req["params"].(map[string]any)
			msg, _ := p["message"].(string)
			asked = append(asked, req["method"].(string)+": "+msg)
			return form
		}
	}
	for i, form := range []any{map[string]any{"decision": "approved"}, map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}} {
		m := s.callAnswering(1+i, "execOneOffCommand", map[string]any{"command": []string{"sh", "-c", "echo hi; echo err >&2; exit 4"},
			"sandboxPolicy": map[string]any{"mode": "danger-full-access"}}, approve(form))
		res, _ := m["result"].(map[string]any)
		if m["error"] != nil || res["exitCode"] != float64(4) || res["stdout"] != "hi\n" || res["stderr"] != "err\n" || len(res) != 3 {
			t.Fatalf("approved with %v: %v", form, m)
		}
	}
	if len(asked) != 2 || !strings.HasPrefix(asked[0], "elicitation/create: ") || !strings.Contains(asked[0], "execOneOffCommand") ||
		!strings.Contains(asked[0], "echo hi") {
		t.Fatalf("the approvals asked: %q", asked)
	}

	outside := t.TempDir()
	escape := filepath.Join(outside, "escaped")
	m := s.callAnswering(3, "execOneOffCommand", map[string]any{"command": []string{"sh", "-c", "echo x > " + escape + " && echo ran"}},
		approve(map[string]any{"decision": "approved"}))
	if res, _ := m["result"].(map[string]any); res["exitCode"] == float64(0) || fileExists(outside, "escaped") {
		t.Fatalf("a write outside the workspace was not refused: %v", m)
	}

	m = s.callAnswering(4, "execOneOffCommand", map[string]any{"command": []string{"touch", "declined-marker"}},
		approve(map[string]any{"decision": "denied"}))
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32600) || !strings.Contains(e["message"].(string), "declined") {
		t.Fatalf("declined: %v", m)
	}
	if _, err := os.Stat(filepath.Join(ws, "declined-marker")); err == nil {
		t.Fatal("the declined command ran")
	}
	m = s.call(5, "execOneOffCommand", map[string]any{"command": "not an argv"})
	if e, _ := m["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Fatalf("bad params: %v", m)
	}
}
