package e2e

// server-everything's prompts and completions through troupe: a
// session-based client (the TypeScript SDK) gets from troupe what it gets
// from the server directly, but for the prompts' names, which carry the
// server's prefix.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"
)

// everythingPromptSteps are the prompt and completion requests, with
// prompt names as the server has them.
func everythingPromptSteps() []step {
	return []step{
		{Op: "listPrompts"},
		{Op: "getPrompt", Name: "simple-prompt"},
		{Op: "getPrompt", Name: "args-prompt", Arguments: map[string]any{"city": "Zürich", "state": "ZH"}},
		{Op: "getPrompt", Name: "resource-prompt", Arguments: map[string]any{"resourceType": "Blob", "resourceId": "2"}},
		{Op: "getPrompt", Name: "resource-prompt", Arguments: map[string]any{"resourceType": "Nope", "resourceId": "2"}},
		{Op: "complete", Ref: map[string]any{"type": "ref/prompt", "name": "completable-prompt"},
			Argument: map[string]any{"name": "department", "value": "S"}},
		{Op: "complete", Ref: map[string]any{"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"},
			Argument: map[string]any{"name": "resourceId", "value": "7"}},
	}
}

// promptNames is the prompt names of a listPrompts step.
func promptNames(t *testing.T, got stepResult) []string {
	t.Helper()
	var r struct {
		Prompts []struct {
			Name string `json:"name"`
		} `json:"prompts"`
	}
	if !got.OK || json.Unmarshal(got.Result, &r) != nil {
		t.Fatalf("listPrompts: %v", got)
	}
	var names []string
	for _, p := range r.Prompts {
		names = append(names, p.Name)
	}
	return names
}

// unprefixed is a listPrompts result with prefix taken off each name.
func unprefixed(t *testing.T, got stepResult, prefix string) string {
	t.Helper()
	var r struct {
		Prompts []map[string]any `json:"prompts"`
	}
	if err := json.Unmarshal(got.Result, &r); err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Prompts {
		name, _ := p["name"].(string)
		if len(name) < len(prefix) || name[:len(prefix)] != prefix {
			t.Errorf("prompt %q lacks the prefix %q", name, prefix)
			continue
		}
		p["name"] = name[len(prefix):]
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func promptsThroughTroupe(t *testing.T, table string) {
	requireDownstream(t)
	steps := everythingPromptSteps()
	via := throughTroupe(t, downstreamConfig(t, table), prefixedPrompts("everything.", steps))
	command, args := everythingStdioCommand(t)
	direct := runScenario(t, scenario{Transport: transport{Kind: "stdio", Command: command, Args: args}, Steps: steps})
	if len(via.Steps) != len(direct.Steps) {
		t.Fatalf("%d steps through troupe, %d directly", len(via.Steps), len(direct.Steps))
	}
	names := promptNames(t, via.Steps[0])
	for _, want := range []string{"simple-prompt", "args-prompt", "resource-prompt", "completable-prompt"} {
		if !slices.Contains(names, "everything."+want) {
			t.Errorf("troupe does not list everything.%s: %q", want, names)
		}
	}
	if got, want := unprefixed(t, via.Steps[0], "everything."), string(direct.Steps[0].Result); !jsonEqual(got, want) {
		t.Errorf("prompts/list differs but for the names:\n via %s\n direct %s", got, want)
	}
	for i := 1; i < len(steps); i++ {
		x, y := via.Steps[i], direct.Steps[i]
		// The blob of resource-prompt says when it was made.
		x.Result, y.Result = withoutClock(t, x.Result), withoutClock(t, y.Result)
		if x.OK != y.OK || (x.OK && !jsonEqual(string(x.Result), string(y.Result))) || (!x.OK && x.String() != y.String()) {
			t.Errorf("step %d (%s %s) differs:\n via    %v\n direct %v", i, steps[i].Op, steps[i].Name, x, y)
		}
	}
	// A prompt no server has is invalid params, as a server says it.
	unknown := throughTroupe(t, downstreamConfig(t, table), []step{{Op: "getPrompt", Name: "everything.no-such-prompt"},
		{Op: "getPrompt", Name: "elsewhere.simple-prompt"}})
	for i, r := range unknown.Steps {
		if r.OK || r.Error == nil || r.Error.Code == nil || *r.Error.Code != -32602 {
			t.Errorf("unknown prompt %d: %v, want error -32602", i, r)
		}
	}
}

// prefixedPrompts renames the steps' prompts to their troupe names.
func prefixedPrompts(prefix string, steps []step) []step {
	out := slices.Clone(steps)
	for i := range out {
		switch out[i].Op {
		case "getPrompt":
			out[i].Name = prefix + out[i].Name
		case "complete":
			ref := out[i].Ref.(map[string]any)
			if ref["type"] == "ref/prompt" {
				out[i].Ref = map[string]any{"type": "ref/prompt", "name": prefix + ref["name"].(string)}
			}
		}
	}
	return out
}

func TestGatewayPromptsStdio(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	promptsThroughTroupe(t, stdioServerTable("everything", command, args, "requires_approval = false"))
}

func TestGatewayPromptsHTTP(t *testing.T) {
	requireDownstream(t)
	endpoint := startEverythingHTTP(t)
	promptsThroughTroupe(t, fmt.Sprintf("[mcp_servers.everything]\nurl = %q\nrequires_approval = false\n", endpoint))
}

// clock is the time of day server-everything puts in its resources.
var clock = regexp.MustCompile(`\d{1,2}:\d{2}:\d{2} [AP]M`)

// withoutClock is raw with every base64 blob decoded and the times of day
// in it and in its text masked; what differs otherwise still differs.
func withoutClock(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	blob := regexp.MustCompile(`"blob":"([A-Za-z0-9+/=]*)"`)
	raw = clock.ReplaceAll(raw, []byte("<time>"))
	return blob.ReplaceAllFunc(raw, func(m []byte) []byte {
		b, err := base64.StdEncoding.DecodeString(string(blob.FindSubmatch(m)[1]))
		if err != nil {
			t.Errorf("blob is not base64: %s", m)
			return m
		}
		q, _ := json.Marshal(clock.ReplaceAllString(string(b), "<time>"))
		return append([]byte(`"blob":`), q...)
	})
}
