package actors

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"troupe/protocol"
	"troupe/tools"
)

// namedTool is a tool with a name, a read-only hint and a safety; its
// calls do nothing.
type namedTool struct {
	name     string
	readOnly bool
	safety   tools.Safety
}

func (n namedTool) Spec() tools.Spec {
	ro := n.readOnly
	return tools.Spec{Name: n.name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &protocol.ToolAnnotations{ReadOnlyHint: &ro}, Safety: n.safety}
}

func (namedTool) Call(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
	return textResult("ok"), nil
}

// TestInstructionsNameTheToolsTheSessionSees: initialize's instructions
// are generated from the session's registry — a server whose operator
// turned shell.exec off and denied repo.ripgrep names neither — in the
// names the client shows (Codex: repo_readFile), with the operator's
// configured text after them.
func TestInstructionsNameTheToolsTheSessionSees(t *testing.T) {
	served := []tools.Tool{
		namedTool{name: "repo.listDir", readOnly: true},
		namedTool{name: "repo.readFile", readOnly: true},
		namedTool{name: "fs.writeFile", safety: tools.Safety{HighRisk: true}},
		namedTool{name: "git.status", safety: tools.Safety{RequiresApproval: true}},
	}
	for _, tc := range []struct {
		client     string
		want, dont []string
	}{
		{"codex-mcp-client", []string{"repo_listDir", "repo_readFile", "fs_writeFile", "git_status", "OPERATOR NOTE"},
			[]string{"repo.readFile", "shell", "ripgrep", "docs"}},
		{"inspector", []string{"repo.listDir", "repo.readFile", "fs.writeFile", "git.status", "OPERATOR NOTE"},
			[]string{"repo_readFile", "shell", "ripgrep", "docs"}},
	} {
		t.Run(tc.client, func(t *testing.T) {
			c := newClient(t, Options{Session: SessionOptions{Instructions: "OPERATOR NOTE: be brief."}}, served...)
			c.request(0, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": tc.client, "version": "1"}})
			var res protocol.InitializeResult
			if m := c.recv(); m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
				t.Fatalf("initialize: %s", m.raw)
			}
			text := res.Instructions
			t.Logf("instructions:\n%s", text)
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("instructions lack %q:\n%s", w, text)
				}
			}
			for _, d := range tc.dont {
				if strings.Contains(text, d) {
					t.Errorf("instructions mention %q, which this session does not see (or not by that name):\n%s", d, text)
				}
			}
			if !strings.HasSuffix(text, "\n\nOPERATOR NOTE: be brief.") {
				t.Errorf("the configured text must follow the generated part as a paragraph of its own:\n%s", text)
			}
		})
	}
}

// TestInstructionsUseCodexHashSuffixes: tools whose names collide once
// Codex sanitises them get Codex's hash suffix in the instructions too,
// so the model is told the names it can call.
func TestInstructionsUseCodexHashSuffixes(t *testing.T) {
	c := newClient(t, Options{}, namedTool{name: "x.y", readOnly: true}, namedTool{name: "x_y", readOnly: true})
	c.request(0, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "codex-mcp-client", "version": "1"}})
	var res protocol.InitializeResult
	if m := c.recv(); m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		t.Fatalf("initialize: %s", m.raw)
	}
	visible := tools.CodexVisibleNames("troupe", []string{"x.y", "x_y"})
	for _, n := range []string{"x.y", "x_y"} {
		if v := visible[n]; v == "x_y" || !strings.Contains(res.Instructions, v) {
			t.Errorf("instructions must name %s as Codex shows it (%s):\n%s", n, v, res.Instructions)
		}
	}
}
