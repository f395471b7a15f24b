package instructions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"troupe/gate"
	"troupe/protocol"
	"troupe/tools"
)

// tool is a tool with a name, a read-only hint and whether it needs
// approval; its calls do nothing.
type tool struct {
	name     string
	readOnly bool
	approval bool
}

func (n tool) Spec() tools.Spec {
	ro := n.readOnly
	return tools.Spec{Name: n.name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &protocol.ToolAnnotations{ReadOnlyHint: &ro}, Safety: tools.Safety{RequiresApproval: n.approval}}
}

func (tool) Call(context.Context, *tools.Request) (*protocol.CallToolResult, error) { return nil, nil }

func registry(t *testing.T, ts ...tools.Tool) *tools.Registry {
	t.Helper()
	reg, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// A session without tools is told so, and the operator's text follows.
func TestForNoTools(t *testing.T) {
	got := For(nil, protocol.Implementation{Name: "c"}, "  be brief  ", gate.Policy{})
	if got != "troupe serves no tools to this session.\n\nbe brief" {
		t.Fatalf("got %q", got)
	}
}

// Tools are sorted into read-only, other and approval lines, a line names
// at most maxNamedTools and counts the rest, and read-only tools are
// preferred only when some tool waits for approval.
func TestForGroupsAndBounds(t *testing.T) {
	var ts []tools.Tool
	for i := range maxNamedTools + 3 {
		ts = append(ts, tool{name: fmt.Sprintf("r%02d", i), readOnly: true})
	}
	ts = append(ts, tool{name: "w", approval: true}, tool{name: "o"})
	got := For(registry(t, ts...), protocol.Implementation{Name: "c"}, "", gate.Policy{})
	for _, want := range []string{
		"Read-only tools: r00, r01,", "r23 and 3 more (see tools/list).",
		"Other tools: o.", "Tools that wait for a person's approval on each call: w.",
		"Prefer the read-only tools when they suffice.",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("instructions lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "r24") {
		t.Fatalf("more than %d names on a line:\n%s", maxNamedTools, got)
	}
	if got := For(registry(t, tool{name: "r", readOnly: true}), protocol.Implementation{}, "", gate.Policy{}); strings.Contains(got, "Prefer") {
		t.Fatalf("read-only tools preferred with nothing to prefer them to:\n%s", got)
	}
}

// A held tool (a downstream tool that changed and waits for an operator)
// is not named in the instructions, for Codex nor anyone: the model is
// not told of a tool it cannot call.
func TestHeldToolsAreNotNamed(t *testing.T) {
	reg, err := tools.Build([]tools.Registration{
		{Tool: tool{name: "repo.readFile", readOnly: true}, Source: "first-party"},
		{Tool: tool{name: "s.rugpull", readOnly: true}, Source: "mcp_servers.s", Held: "held"},
		{Tool: tool{name: "s.asks", approval: true}, Source: "mcp_servers.s", Held: "held"},
	}, tools.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"test", codexClientName} {
		text := For(reg, protocol.Implementation{Name: client}, "", gate.Policy{})
		if strings.Contains(text, "rugpull") || strings.Contains(text, "asks") || !strings.Contains(text, "readFile") {
			t.Fatalf("%s: %s", client, text)
		}
	}
}
