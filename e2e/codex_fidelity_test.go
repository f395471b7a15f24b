package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// With the real Codex (issue 14, item 8): Codex offers the model as many
// of server-everything's tools through troupe as it offers when it talks
// to server-everything itself, and a downstream server behind troupe
// receives Codex's _meta of the call (callId, threadId, turn metadata)
// beside troupe's own progress token.
func TestCodexSeesDownstreamsAsDirect(t *testing.T) {
	codexBinary(t)
	fx := newFixture(t)
	command, args := everythingStdioCommand(t)
	troupeCfg := downstreamConfig(t, stdioServerTable("everything", command, args, "")+recorderTable(t, "rec")+waitForDownstreams)
	quotedArgs, _ := json.Marshal(args)
	servers := fmt.Sprintf(`[mcp_servers.troupe]
command = %q
args = ["serve", "--workspace", %q, "--config", %q]
env = { XDG_STATE_HOME = %q }

[mcp_servers.everything]
command = %q
args = %s
`, troupeBinary(t), fx.dir, troupeCfg, stateHome, command, quotedArgs)

	waits := 0
	model := newScriptedModel(t, func(req modelRequest) modelItem {
		_, viaTroupe := req.namespace("mcp__troupe")
		_, direct := req.namespace("mcp__everything")
		if !viaTroupe || !direct {
			waits++
			return functionCall(fmt.Sprintf("call_wait_%d", waits), "", "wait_for_tools", map[string]any{})
		}
		if _, done := req.outputs()["call_meta"]; !done {
			return functionCall("call_meta", "mcp__troupe", "rec_received", map[string]any{})
		}
		return message("done")
	})
	runCodex(t, model, fx.dir, servers, "show me what the downstream received")

	model.mu.Lock()
	defer model.mu.Unlock()
	last := model.requests[len(model.requests)-1]
	viaTroupe, _ := last.namespace("mcp__troupe")
	direct, _ := last.namespace("mcp__everything")
	var everything []string
	for _, n := range viaTroupe {
		if rest, ok := strings.CutPrefix(n, "everything_"); ok {
			everything = append(everything, rest)
		}
	}
	for i, n := range direct {
		direct[i] = strings.ReplaceAll(n, "-", "_")
	}
	slices.Sort(everything)
	slices.Sort(direct)
	if len(direct) != 15 || !slices.Equal(everything, direct) {
		t.Errorf("Codex offers %d of server-everything's tools through troupe, %d directly:\n%q\n%q",
			len(everything), len(direct), everything, direct)
	}

	out, ok := last.outputs()["call_meta"]
	if !ok {
		t.Fatalf("no function_call_output for call_meta")
	}
	// Codex hands the model a list of input_text items: "Wall time…"
	// and then the recorder's text, the JSON of the _meta it received.
	var items []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(out), &items); err != nil || len(items) < 2 {
		t.Fatalf("Codex returned %s (%v)", out, err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal([]byte(items[len(items)-1].Text), &meta); err != nil {
		t.Fatalf("the recorder's answer %s: %v", out, err)
	}
	if string(meta["callId"]) != `"call_meta"` {
		t.Errorf("downstream _meta.callId = %s, want Codex's call id \"call_meta\" (all: %s)", meta["callId"], out)
	}
	for _, k := range []string{"threadId", "x-codex-turn-metadata"} {
		if len(meta[k]) == 0 || string(meta[k]) == "null" {
			t.Errorf("downstream _meta lacks %s: %s", k, out)
		}
	}
	if tok := string(meta["progressToken"]); !strings.HasPrefix(tok, `"troupe-`) {
		t.Errorf("downstream progressToken %s, want troupe's own", tok)
	}
}
