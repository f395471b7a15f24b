package actors

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/audit"
	"troupe/gate"
	"troupe/protocol"
	"troupe/tools"
)

// gatedTool needs approval (high-risk when risky) and counts its runs.
type gatedTool struct {
	name  string
	risky bool
	runs  *atomic.Int32
}

func (g gatedTool) Spec() tools.Spec {
	return tools.Spec{Name: g.name, Description: "changes things",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"token":{"type":"string"},"n":{"type":"integer"}}}`),
		Safety:      tools.Safety{RequiresApproval: true, HighRisk: g.risky, SideEffects: []string{"filesystem"}}}
}

func (g gatedTool) Call(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
	g.runs.Add(1)
	return textResult("ran"), nil
}

func (c *client) initializeWith(version string, caps map[string]any) {
	c.t.Helper()
	c.request(0, "initialize", map[string]any{"protocolVersion": version, "capabilities": caps,
		"clientInfo": map[string]any{"name": "test", "version": "1"}})
	if m := c.recv(); m.Error != nil {
		c.t.Fatalf("initialize: %s", m.raw)
	}
	c.notify("notifications/initialized", nil)
}

var elicitCaps = map[string]any{"elicitation": map[string]any{}}

// expectElicitation reads the server's approval request.
func (c *client) expectElicitation() (msg, protocol.ElicitRequestParams) {
	c.t.Helper()
	m := c.recv()
	var p protocol.ElicitRequestParams
	if m.Method != "elicitation/create" || json.Unmarshal(m.Params, &p) != nil {
		c.t.Fatalf("want elicitation/create, got %s", m.raw)
	}
	return m, p
}

func (c *client) answer(m msg, result string) {
	c.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`)
}

func TestApprovalOnceRunsOnlyThatCall(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{}, gatedTool{name: "g", runs: &runs})
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "tools/call", map[string]any{"name": "g", "arguments": map[string]any{"n": 1, "token": "hunter22"}})
	m, p := c.expectElicitation()
	if p.Mode != "" || !strings.Contains(p.Message, "g") || strings.Contains(p.Message, "hunter22") {
		t.Fatalf("prompt (mode %q): %s", p.Mode, p.Message)
	}
	field := p.RequestedSchema.Properties["decision"].(map[string]any)
	if field["enum"] == nil || field["enumNames"] == nil || field["type"] != "string" {
		t.Fatalf("2025-06-18 form must use enum + enumNames: %v", field)
	}
	c.answer(m, `{"action":"accept","content":{"decision":"once"}}`)
	if r := c.toolResult(c.recv()); r.IsError || runs.Load() != 1 {
		t.Fatalf("approved call: %+v, runs %d", r, runs.Load())
	}
	c.request(2, "tools/call", map[string]any{"name": "g"})
	m, _ = c.expectElicitation() // once means once
	c.answer(m, `{"action":"accept","content":{"decision":"deny"}}`)
	r := c.toolResult(c.recv())
	if !r.IsError || !strings.Contains(errorText(r), "permission_denied") || runs.Load() != 1 {
		t.Fatalf("denied call: %+v, runs %d", r, runs.Load())
	}
}

func TestApprovalForTheSessionStaysInTheSession(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{}, gatedTool{name: "g", risky: true, runs: &runs})
	c.initializeWith("2025-11-25", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})
	c.request(1, "tools/call", map[string]any{"name": "g"})
	m, p := c.expectElicitation()
	field := p.RequestedSchema.Properties["decision"].(map[string]any)
	if p.Mode != "form" || field["oneOf"] == nil {
		t.Fatalf("2025-11-25 form must have mode form and oneOf choices: %+v", p)
	}
	c.answer(m, `{"action":"accept","content":{"decision":"session"}}`)
	c.toolResult(c.recv())
	c.request(2, "tools/call", map[string]any{"name": "g"})
	if r := c.toolResult(c.recv()); r.IsError || runs.Load() != 2 {
		t.Fatalf("trusted call: %+v, runs %d", r, runs.Load())
	}
	// Another session on the same server is asked again.
	other := newClientOnHost(t, c.host)
	other.initializeWith("2025-06-18", elicitCaps)
	other.request(1, "tools/call", map[string]any{"name": "g"})
	m, _ = other.expectElicitation()
	other.answer(m, `{"action":"decline"}`)
	if r := other.toolResult(other.recv()); !r.IsError || !strings.Contains(errorText(r), "declined") || runs.Load() != 2 {
		t.Fatalf("declined in another session: %+v, runs %d", r, runs.Load())
	}
}

func TestCodexPersistMetaTrustsForTheSession(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{}, gatedTool{name: "g", runs: &runs})
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "tools/call", map[string]any{"name": "g"})
	m, p := c.expectElicitation()
	if p.Meta["persist"] == nil {
		t.Fatalf("the request does not offer persist: %v", p.Meta)
	}
	c.answer(m, `{"action":"accept","content":{},"_meta":{"persist":"always"}}`)
	c.toolResult(c.recv())
	c.request(2, "tools/call", map[string]any{"name": "g"})
	if r := c.toolResult(c.recv()); r.IsError || runs.Load() != 2 {
		t.Fatalf("persist=always did not trust the tool for the session: %+v", r)
	}
}

// TestCodexDecisionAnswers: clients written for Codex's former MCP server
// answer an approval with a top-level {"decision": ...} and no action;
// each of its four decisions means what it meant there, and an unknown
// one denies.
func TestCodexDecisionAnswers(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{}, gatedTool{name: "g", runs: &runs}, gatedTool{name: "h", runs: &runs})
	c.initializeWith("2025-06-18", elicitCaps)
	for i, tc := range []struct {
		tool, answer string
		ran          bool
		want         string
	}{
		{"g", `{"decision":"approved"}`, true, ""},
		{"g", `{"decision":"denied"}`, false, "declined"},
		{"g", `{"decision":"abort"}`, false, "cancelled"},
		{"g", `{"decision":"maybe"}`, false, "unknown decision"},
		{"h", `{"decision":"approved_for_session"}`, true, ""},
		{"h", ``, true, ""}, // trusted for the session now: not asked
	} {
		before := runs.Load()
		c.request(i+1, "tools/call", map[string]any{"name": tc.tool})
		if tc.answer != "" {
			m, _ := c.expectElicitation()
			c.answer(m, tc.answer)
		}
		r := c.toolResult(c.recv())
		if ran := runs.Load() > before; ran != tc.ran || r.IsError == tc.ran || !strings.Contains(errorText(r), tc.want) {
			t.Fatalf("%s: ran %v, result %+v", tc.answer, ran, r)
		}
	}
}

func TestApprovalCancelledAndExpired(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{Session: SessionOptions{Gate: gate.Policy{Timeout: 200 * time.Millisecond}}},
		gatedTool{name: "g", runs: &runs})
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "tools/call", map[string]any{"name": "g"})
	m, _ := c.expectElicitation()
	c.answer(m, `{"action":"cancel"}`)
	if r := c.toolResult(c.recv()); !r.IsError || !strings.Contains(errorText(r), "cancelled") {
		t.Fatalf("cancelled approval: %+v", r)
	}
	c.request(2, "tools/call", map[string]any{"name": "g"})
	m, _ = c.expectElicitation()
	// Nobody answers: the request is withdrawn, then the call refused.
	var withdrawn, refused bool
	for !(withdrawn && refused) {
		n := c.recv()
		switch {
		case n.Method == "notifications/cancelled" && strings.Contains(string(n.Params), string(m.ID)):
			withdrawn = true
		case string(n.ID) == "2":
			r := c.toolResult(n)
			if !r.IsError || !strings.Contains(errorText(r), "nobody answered") {
				t.Fatalf("expired approval: %+v", r)
			}
			refused = true
		default:
			t.Fatalf("unexpected %s", n.raw)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("the tool ran %d times without approval", runs.Load())
	}
}

func TestNoElicitationNoRun(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{Session: SessionOptions{Gate: gate.Policy{Trust: []string{"*"}}}},
		gatedTool{name: "risky", risky: true, runs: &runs}, gatedTool{name: "plain", runs: &runs})
	c.initialize("2025-06-18") // no elicitation capability
	c.request(1, "tools/call", map[string]any{"name": "risky"})
	r := c.toolResult(c.recv())
	if !r.IsError || !strings.Contains(errorText(r), "cannot ask") || !strings.Contains(errorText(r), "high-risk") {
		t.Fatalf("high-risk call without elicitation: %+v", r)
	}
	// The configuration trusts every tool, but only the one that is not
	// high-risk runs without asking.
	c.request(2, "tools/call", map[string]any{"name": "plain"})
	if r := c.toolResult(c.recv()); r.IsError || runs.Load() != 1 {
		t.Fatalf("config-trusted call: %+v, runs %d", r, runs.Load())
	}
}

func TestCancellingACallWithdrawsItsApproval(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{}, gatedTool{name: "g", runs: &runs})
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "tools/call", map[string]any{"name": "g"})
	m, _ := c.expectElicitation()
	c.notify("notifications/cancelled", map[string]any{"requestId": 1})
	if n := c.recv(); n.Method != "notifications/cancelled" || !strings.Contains(string(n.Params), string(m.ID)) {
		t.Fatalf("want the elicitation withdrawn, got %s", n.raw)
	}
	c.answer(m, `{"action":"accept","content":{"decision":"once"}}`) // too late
	c.request(2, "ping", nil)
	if n := c.recv(); string(n.ID) != "2" || runs.Load() != 0 {
		t.Fatalf("want only the ping's answer and no run, got %s (runs %d)", n.raw, runs.Load())
	}
}

func TestAuditRecordsEveryCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var runs atomic.Int32
	reg, _ := tools.NewRegistry(gatedTool{name: "g", runs: &runs}, echoTool())
	host := NewHost(Options{Audit: log, Logger: testLogger(t), Session: SessionOptions{Registry: reg}})
	c := attachClient(t, host)
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "tools/call", map[string]any{"name": "echo"})
	c.recv()
	c.request(2, "tools/call", map[string]any{"name": "g"})
	m, _ := c.expectElicitation()
	c.answer(m, `{"action":"decline"}`)
	c.recv()
	c.closeInput()
	<-c.done
	if !host.Close(5 * time.Second) {
		t.Fatal("host did not close")
	}
	f, _ := os.Open(path)
	defer f.Close()
	var recs []audit.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 2 || recs[0].Tool != "echo" || recs[0].Approval != "not_required" || recs[0].Outcome != "ok" ||
		recs[1].Approval != "denied" || recs[1].Outcome != "permission_denied" || recs[1].ArgsHash == "" || recs[1].CorrelationID == "" {
		t.Fatalf("records: %+v", recs)
	}
	f.Seek(0, 0)
	if n, err := audit.Verify(f); err != nil || n != 2 {
		t.Fatalf("verify: %d %v", n, err)
	}
}

// describedTool is gatedTool with another description: the same name,
// but not the tool a person trusted.
type describedTool struct{ gatedTool }

func (d describedTool) Spec() tools.Spec {
	s := d.gatedTool.Spec()
	s.Description = "changes other things"
	return s
}

func TestTrustEndsWhenTheToolChanges(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{}, gatedTool{name: "g", runs: &runs})
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "tools/call", map[string]any{"name": "g"})
	m, _ := c.expectElicitation()
	c.answer(m, `{"action":"accept","content":{"decision":"session"}}`)
	c.toolResult(c.recv())
	// A reload that keeps the tool as it was keeps the trust.
	same, _ := tools.NewRegistry(gatedTool{name: "g", runs: &runs})
	c.host.SetRegistry(same)
	c.request(2, "tools/call", map[string]any{"name": "g"})
	if r := c.toolResult(c.recv()); r.IsError {
		t.Fatalf("trusted call after an identical reload: %+v", r)
	}
	changed, _ := tools.NewRegistry(describedTool{gatedTool{name: "g", runs: &runs}})
	c.host.SetRegistry(changed)
	if n := c.recv(); n.Method != "notifications/tools/list_changed" {
		t.Fatalf("want list_changed, got %s", n.raw)
	}
	c.request(3, "tools/call", map[string]any{"name": "g"})
	c.expectElicitation() // asked again
}
