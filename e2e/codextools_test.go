package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The codex and codex-reply tools, served by the troupe binary and backed
// by the real Codex CLI talking to the scripted model: a client starts a
// conversation, then continues it, and the model sees the history.
func TestCodexToolsThroughTroupe(t *testing.T) {
	bin := codexBinary(t)
	turns := 0
	model := newScriptedModel(t, func(req modelRequest) modelItem {
		turns++
		raw, _ := json.Marshal(req.Input)
		if strings.Contains(string(raw), "second question") {
			if !strings.Contains(string(raw), "first question") || !strings.Contains(string(raw), "answer one") {
				return message("history missing")
			}
			return message("answer two")
		}
		return message("answer one")
	})
	home := t.TempDir()
	cfg := fmt.Sprintf("model = \"scripted\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = %q\nwire_api = \"responses\"\n", model.baseURL())
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CODEX_HOME", home) // troupe passes CODEX_HOME on to Codex
	t.Setenv("RUST_BACKTRACE", "")
	fx := newFixture(t)
	s := startServer(t, fx.dir, "-c", fmt.Sprintf("codex.binary=%q", bin))
	s.initializeWithElicitation()

	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"codex","arguments":{"prompt":"first question"}}}`)
	s.approveNext() // high-risk: troupe asks; "session" trusts codex for the session
	var first map[string]any
	events := 0
	for first == nil {
		m := s.recv()
		switch {
		case m["id"] != nil:
			first = m
		case m["method"] == "codex/event":
			if meta, _ := m["params"].(map[string]any)["_meta"].(map[string]any); meta["requestId"] == float64(1) {
				events++
			}
		}
	}
	if events == 0 {
		t.Error("no codex/event notification tied to the call")
	}
	text := resultText(t, first)
	if isToolError(first) || !strings.Contains(text, "answer one") {
		t.Fatalf("codex: %v", first)
	}
	var structured struct {
		ConversationID string `json:"conversationId"`
	}
	b, _ := json.Marshal(first["result"].(map[string]any)["structuredContent"])
	if err := json.Unmarshal(b, &structured); err != nil || structured.ConversationID == "" {
		t.Fatalf("no conversation id in %s", b)
	}

	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"codex-reply","arguments":{"conversationId":%q,"prompt":"second question"}}}`,
		structured.ConversationID))
	m := s.recv()
	if m["method"] == "elicitation/create" { // codex-reply is a tool of its own: asked once
		id, _ := m["id"].(float64)
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"action":"accept","content":{"decision":"once"}}}`, int(id)))
		m = s.recvResponse()
	} else if m["id"] == nil {
		m = s.recvResponse()
	}
	if isToolError(m) || !strings.Contains(resultText(t, m), "answer two") {
		t.Fatalf("codex-reply: %v", m)
	}

	s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"codex-reply","arguments":{"conversationId":"no-such-id","prompt":"x"}}}`)
	if m := s.recvResponse(); !isToolError(m) || !strings.Contains(resultText(t, m), "not_found") {
		t.Fatalf("unknown conversation: %v", m)
	}
}
