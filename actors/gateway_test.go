package actors

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"troupe/audit"
	"troupe/protocol"
	"troupe/tools"
)

// gatewayTool is a Gateway tool for method that answers with result, or
// with a downstream server's JSON-RPC error when code is not 0.
type gatewayTestTool struct {
	method string
	result any
	code   string
}

func (g gatewayTestTool) Spec() tools.Spec {
	return tools.Spec{Name: GatewayTool(g.method), InputSchema: json.RawMessage(`{"type":"object"}`), ServerValidates: true}
}

func (g gatewayTestTool) Call(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	if g.code != "" {
		return &protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("no such prompt")},
			Meta: map[string]any{protocol.MetaPrefix + "error": map[string]string{"kind": "unavailable",
				GatewayErrorCode: g.code, GatewayErrorData: `{"uri":"x"}`}}}, nil
	}
	if g.result == nil {
		return &protocol.CallToolResult{StructuredContent: json.RawMessage(req.Arguments)}, nil
	}
	return &protocol.CallToolResult{StructuredContent: g.result}, nil
}

func gatewayOptions(t *testing.T) Options {
	t.Helper()
	reg, err := tools.NewRegistry(
		gatewayTestTool{method: protocol.MethodPromptsList, result: map[string]any{"prompts": []any{map[string]any{"name": "s.p"}}}},
		gatewayTestTool{method: protocol.MethodPromptsGet, code: "-32602"},
		gatewayTestTool{method: protocol.MethodCompletionComplete},
	)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Session: SessionOptions{Gateway: reg}}
}

// TestGatewayMethods: with a Gateway, initialize declares prompts and
// completions; the methods answer with their tools' structured content in
// both eras (the stateless era's members added), and a downstream's error
// passes through with its code and data.
func TestGatewayMethods(t *testing.T) {
	c := newClient(t, gatewayOptions(t), echoTool())
	init := c.initialize("2025-11-25")
	if !strings.Contains(string(init.Result), `"prompts":{"listChanged":true}`) || !strings.Contains(string(init.Result), `"completions":{}`) {
		t.Fatalf("initialize: %s", init.Result)
	}
	c.request(1, "prompts/list", nil)
	if m := c.recv(); string(m.Result) != `{"prompts":[{"name":"s.p"}]}` {
		t.Fatalf("prompts/list: %s", m.raw)
	}
	c.request(2, "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "s.p"}})
	if m := c.recv(); !strings.Contains(string(m.Result), `"ref":{"name":"s.p","type":"ref/prompt"}`) {
		t.Fatalf("completion/complete: %s", m.raw)
	}
	c.request(3, "prompts/get", map[string]any{"name": "s.q"})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams || m.Error.Message != "no such prompt" ||
		string(m.Error.Data) != `{"uri":"x"}` {
		t.Fatalf("prompts/get of an unknown prompt: %s", m.raw)
	}
	c.request(4, "prompts/list", modernParams(nil, ""))
	if m := c.recv(); !strings.Contains(string(m.Result), `"resultType":"complete"`) || !strings.Contains(string(m.Result), `"cacheScope":"private"`) {
		t.Fatalf("prompts/list in 2026-07-28: %s", m.raw)
	}
}

// TestGatewayPromptsChanged: Host.PromptsChanged (and ResourcesChanged)
// reaches an initialized session as notifications/prompts/list_changed
// (resources/list_changed) and each subscription that asked for those
// changes; without a Gateway, nobody is told and no subscription agrees
// to them.
func TestGatewayPromptsChanged(t *testing.T) {
	c := newClient(t, gatewayOptions(t), echoTool())
	c.initialize("2025-11-25")
	c.host.PromptsChanged()
	if m := c.recv(); m.Method != protocol.NotificationPromptsListChanged {
		t.Fatalf("want prompts/list_changed, got %s", m.raw)
	}
	modern := newClientOnHost(t, c.host)
	modern.request("sub", "subscriptions/listen", modernParams(map[string]any{
		"notifications": map[string]any{"promptsListChanged": true, "resourcesListChanged": true}}, ""))
	if ack := modern.recv(); !strings.Contains(string(ack.Params), `"notifications":{"promptsListChanged":true,"resourcesListChanged":true}`) {
		t.Fatalf("acknowledgment: %s", ack.raw)
	}
	c.host.PromptsChanged()
	if m := c.recv(); m.Method != protocol.NotificationPromptsListChanged {
		t.Fatalf("want prompts/list_changed again, got %s", m.raw)
	}
	if m := modern.recv(); m.Method != protocol.NotificationPromptsListChanged || !strings.Contains(string(m.Params), `"sub"`) {
		t.Fatalf("want prompts/list_changed for the subscription, got %s", m.raw)
	}
	c.host.ResourcesChanged()
	if m := c.recv(); m.Method != protocol.NotificationResourcesListChanged {
		t.Fatalf("want resources/list_changed, got %s", m.raw)
	}
	if m := modern.recv(); m.Method != protocol.NotificationResourcesListChanged || !strings.Contains(string(m.Params), `"sub"`) {
		t.Fatalf("want resources/list_changed for the subscription, got %s", m.raw)
	}

	plain := newClient(t, Options{}, echoTool())
	plain.initialize("2025-11-25")
	plain.host.PromptsChanged()
	plain.request(1, "ping", nil)
	if m := plain.recv(); string(m.ID) != "1" {
		t.Fatalf("a session without a gateway was told: %s", m.raw)
	}
}

// TestGatewayMethodsAreAudited: each gateway method leaves an audit record
// under its tool's name, as a tool call does.
func TestGatewayMethodsAreAudited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	o := gatewayOptions(t)
	o.Audit = log
	c := newClient(t, o, echoTool())
	c.initialize("2025-11-25")
	c.request(1, "prompts/list", nil)
	c.request(2, "prompts/get", map[string]any{"name": "s.q"})
	c.request(3, "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "s.p"}})
	for range 3 {
		c.recv()
	}
	c.closeInput()
	<-c.done
	if !c.host.Close(5 * time.Second) {
		t.Fatal("host did not close")
	}
	verifyAudit(t, path, 3)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"prompts.list", "prompts.get", "completion.complete"} {
		if !strings.Contains(string(b), `"tool":"`+tool+`"`) {
			t.Errorf("no audit record of %s:\n%s", tool, b)
		}
	}
}
