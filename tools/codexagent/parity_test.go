package codexagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"troupe/sandbox"

	"troupe/tools"
)

// codex153 is Codex 0.153.4, the last release with `codex mcp-server` and
// its codex/codex-reply tools, which troupe's tools stand in for: pinned
// in e2e/codexref (scripts/test installs it; $TROUPE_CODEX_153 names
// another). Without it the parity test skips locally and fails in CI.
func codex153(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("TROUPE_CODEX_153")
	if bin == "" {
		var err error
		if bin, err = filepath.Abs(filepath.Join("..", "..", "e2e", "codexref", "node_modules", "codex-0.153", "bin", "codex.js")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: scripts/test should have installed it", bin)
		}
		t.Skipf("Codex 0.153.4 is not installed (%s; run scripts/test): no parity test", bin)
	}
	return bin
}

// oldServer is a running `codex mcp-server` of 0.153.4, driven over stdio
// with the same JSON-RPC connection the tools use for app-server.
type oldServer struct {
	c      *conn
	nextID int
	events []map[string]any // codex/event params of the last call
}

func startOldServer(t *testing.T, bin string, model *scriptedModel) *oldServer {
	t.Helper()
	home, ws := t.TempDir(), t.TempDir()
	cfg := fmt.Sprintf("model = \"scripted\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\n"+
		"name = \"scripted\"\nbase_url = %q\nwire_api = \"responses\"\n", model.srv.URL+"/v1")
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "LANG=C.UTF-8"}
	// The old release is the reference, not what is tested: it runs as
	// it ran before troupe, outside the sandbox.
	sb := testOptions(t, Options{}).Sandbox
	proc, err := startProcess(sb, sandbox.Policy{Profile: sandbox.ProfileNone}, []string{bin, "mcp-server"}, ws, env)
	if err != nil {
		t.Fatal(err)
	}
	s := &oldServer{c: newConn(proc)}
	t.Cleanup(func() { s.c.close(true) })
	if _, err := s.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "troupe-parity", "version": "0"}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if err := s.c.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// call sends a request (with the "jsonrpc" member an MCP server wants,
// which conn.send leaves out) and keeps the codex/event notifications that
// come before its answer.
func (s *oldServer) call(method string, params any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.events = nil
	s.nextID++
	id := fmt.Sprint(s.nextID)
	if err := s.c.write(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params}); err != nil {
		return nil, err
	}
	for {
		m, err := s.c.next(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case m.Method == MethodEvent:
			var p map[string]any
			if json.Unmarshal(m.Params, &p) == nil {
				s.events = append(s.events, p)
			}
		case m.isResponse() && string(m.ID) == id:
			if m.Error != nil {
				return nil, m.Error
			}
			return m.Result, nil
		}
	}
}

// oldTool is a tool as tools/list described it.
type oldTool struct {
	Name         string         `json:"name"`
	InputSchema  map[string]any `json:"inputSchema"`
	OutputSchema map[string]any `json:"outputSchema"`
}

// TestParityWithCodex153 compares troupe's codex and codex-reply with
// Codex 0.153.4's: every input property (and enum value) the old tools
// took is accepted, the old output fields are produced, a call's result
// has the old top-level fields and structuredContent keys, and the
// codex/event notifications carry the old envelope, event types and
// fields.
//
// Deliberate differences (not checked):
//   - cwd must lie inside troupe's workspace (0.153: anywhere).
//   - codex/event: raw_response_item, raw_response_completed,
//     item_started, item_completed (0.153's own v2-style duplicates of
//     the events) and mcp_startup_complete are not sent, nor token-level
//     deltas; session_configured has no rollout_path (a host path) nor
//     0.153's permission_profile; a warning before the turn exists has an
//     empty id.
func TestParityWithCodex153(t *testing.T) {
	bin := codex153(t)
	// The same answer for the same prompt, whoever asks.
	model := newScriptedModel(t, func(req modelRequest) map[string]any {
		last := ""
		for _, s := range req.texts() {
			if strings.HasPrefix(s, "user: ") {
				last = s
			}
		}
		return modelMessage("answer to " + last)
	})
	old := startOldServer(t, bin, model)
	raw, err := old.call("tools/list", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Tools []oldTool }
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	s, ts, _ := setup(t, model)
	// Both modes of the feature gate (Options.Surface) offer the same
	// names and arguments as 0.153.4.
	surfaced := s.opts
	surfaced.Surface = true
	tsOn, err := Tools(surfaced)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 2 {
		t.Fatalf("0.153.4 listed %d tools", len(list.Tools))
	}
	for i, set := range [][]tools.Tool{ts, tsOn} {
		mine := map[string]tools.Spec{}
		for _, tool := range set {
			mine[tool.Spec().Name] = tool.Spec()
		}
		for _, o := range list.Tools {
			spec, ok := mine[o.Name]
			if !ok {
				t.Errorf("troupe has no %s tool (surface %v)", o.Name, i == 1)
				continue
			}
			compareSchemas(t, o, spec)
		}
	}

	// One call each way, same scripted model.
	rawOld, err := old.call("tools/call", map[string]any{"name": "codex", "arguments": map[string]any{"prompt": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	oldEvents := old.events
	sess := &fakeSession{}
	b, _ := json.Marshal(map[string]any{"prompt": "hello"})
	res, err := ts[0].Call(context.Background(), &tools.Request{Arguments: b, Session: sess, RequestID: json.RawMessage(`3`)})
	if err != nil {
		t.Fatal(err)
	}
	rawMine, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	compareResults(t, rawOld, rawMine)
	compareEvents(t, oldEvents, sess.take())

	// codex-reply with 0.153's threadId, on both.
	var oldRes struct {
		StructuredContent struct{ ThreadID string } `json:"structuredContent"`
	}
	_ = json.Unmarshal(rawOld, &oldRes)
	var myRes struct {
		StructuredContent struct{ ThreadID string } `json:"structuredContent"`
	}
	_ = json.Unmarshal(rawMine, &myRes)
	rawOld, err = old.call("tools/call", map[string]any{"name": "codex-reply",
		"arguments": map[string]any{"threadId": oldRes.StructuredContent.ThreadID, "prompt": "again"}})
	if err != nil {
		t.Fatal(err)
	}
	oldEvents = old.events
	b, _ = json.Marshal(map[string]any{"threadId": myRes.StructuredContent.ThreadID, "prompt": "again"})
	res, err = ts[1].Call(context.Background(), &tools.Request{Arguments: b, Session: sess, RequestID: json.RawMessage(`4`)})
	if err != nil {
		t.Fatal(err)
	}
	rawMine, _ = json.Marshal(res)
	compareResults(t, rawOld, rawMine)
	compareEvents(t, oldEvents, sess.take())
}

// compareSchemas checks that troupe's tool accepts every property and enum
// value the old tool's input schema had, requires nothing more than the
// old one did (apart from codex-reply's id, checked in code), and that its
// output schema has every old output field.
func compareSchemas(t *testing.T, o oldTool, spec tools.Spec) {
	t.Helper()
	var in, out map[string]any
	if err := json.Unmarshal(spec.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(spec.OutputSchema, &out); err != nil {
		t.Fatal(err)
	}
	oldProps, _ := o.InputSchema["properties"].(map[string]any)
	props, _ := in["properties"].(map[string]any)
	for name, p := range oldProps {
		mp, ok := props[name].(map[string]any)
		if !ok {
			t.Errorf("%s: troupe does not accept %q", o.Name, name)
			continue
		}
		op := p.(map[string]any)
		if op["type"] != mp["type"] {
			t.Errorf("%s.%s: type %v, 0.153 %v", o.Name, name, mp["type"], op["type"])
		}
		if enum, ok := op["enum"].([]any); ok {
			mine := fmt.Sprint(mp["enum"])
			for _, v := range enum {
				if !containsAny(mp["enum"], v) {
					t.Errorf("%s.%s: troupe's enum %s lacks %v", o.Name, name, mine, v)
				}
			}
		}
	}
	oldReq := stringSet(o.InputSchema["required"])
	for name := range stringSet(in["required"]) {
		if !oldReq[name] {
			t.Errorf("%s: troupe requires %q, 0.153 did not", o.Name, name)
		}
	}
	outProps, _ := out["properties"].(map[string]any)
	outReq := stringSet(out["required"])
	for name := range stringSet(o.OutputSchema["required"]) {
		if _, ok := outProps[name]; !ok || !outReq[name] {
			t.Errorf("%s: troupe's output schema lacks required %q", o.Name, name)
		}
	}
}

// compareResults checks that troupe's result has the old result's
// top-level fields and structuredContent keys, and the same final
// message first in content.
func compareResults(t *testing.T, rawOld, rawMine []byte) {
	t.Helper()
	var o, m map[string]any
	if err := json.Unmarshal(rawOld, &o); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rawMine, &m); err != nil {
		t.Fatal(err)
	}
	for k := range o {
		if _, ok := m[k]; !ok {
			t.Errorf("troupe's result lacks %q: old %s, troupe %s", k, rawOld, rawMine)
		}
	}
	osc, _ := o["structuredContent"].(map[string]any)
	msc, _ := m["structuredContent"].(map[string]any)
	for k := range osc {
		if _, ok := msc[k]; !ok {
			t.Errorf("troupe's structuredContent lacks %q: %s", k, rawMine)
		}
	}
	first := func(r map[string]any) any {
		c, _ := r["content"].([]any)
		if len(c) == 0 {
			return nil
		}
		return c[0].(map[string]any)["text"]
	}
	if first(o) != first(m) || osc["content"] != msc["content"] {
		t.Errorf("final messages differ: old %s, troupe %s", rawOld, rawMine)
	}
}

// compareEvents checks troupe's codex/event notifications against the old
// server's for the same turn: the envelope's keys, every old event type
// (but the deliberately left out ones) in the same order, and every old
// msg field.
func compareEvents(t *testing.T, old, mine []map[string]any) {
	t.Helper()
	skipped := map[string]bool{"raw_response_item": true, "raw_response_completed": true, "item_started": true,
		"item_completed": true, "mcp_startup_complete": true}
	skippedFields := map[string]bool{"rollout_path": true, "permission_profile": true, "active_permission_profile": true}
	if len(old) == 0 || len(mine) == 0 {
		t.Fatalf("codex/event: %d from 0.153, %d from troupe", len(old), len(mine))
	}
	if a, b := keys(old[0]), keys(mine[0]); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("codex/event params keys: 0.153 %v, troupe %v", a, b)
	}
	if a, b := keys(old[0]["_meta"].(map[string]any)), keys(mine[0]["_meta"].(map[string]any)); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("codex/event _meta keys: 0.153 %v, troupe %v", a, b)
	}
	byType := map[string]map[string]any{}
	var myTypes []string
	for _, e := range mine {
		msg := e["msg"].(map[string]any)
		typ := fmt.Sprint(msg["type"])
		myTypes = append(myTypes, typ)
		byType[typ] = msg
	}
	var oldTypes []string
	for _, e := range old {
		msg := e["msg"].(map[string]any)
		typ := fmt.Sprint(msg["type"])
		if skipped[typ] {
			continue
		}
		oldTypes = append(oldTypes, typ)
		m, ok := byType[typ]
		if !ok {
			continue // reported below
		}
		for k := range msg {
			if _, has := m[k]; !has && !skippedFields[k] {
				t.Errorf("troupe's %s lacks %q (0.153: %v)", typ, k, msg)
			}
		}
	}
	// token_count may come once per model request on either side.
	if !subsequence(myTypes, dedupe(oldTypes)) {
		t.Errorf("event types: 0.153 %q, troupe %q", oldTypes, myTypes)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dedupe drops repeats of the previous element.
func dedupe(list []string) []string {
	var out []string
	for _, s := range list {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	list, _ := v.([]any)
	for _, s := range list {
		if s, ok := s.(string); ok {
			out[s] = true
		}
	}
	return out
}

func containsAny(list any, v any) bool {
	l, _ := list.([]any)
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}
