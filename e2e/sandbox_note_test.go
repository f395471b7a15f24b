package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// A write the sandbox refused is explained where the model reads it
// (issue 24, item 4a): in the result's text and its structuredContent
// (all Codex passes on), not only in _meta.
func TestSandboxRefusalIsExplainedInTheResultText(t *testing.T) {
	fx := newFixture(t)
	s := startServer(t, fx.dir)
	s.initializeAs(`{"elicitation":{"form":{}}}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell.exec","arguments":{"command":["sh","-c","echo hi > /etc/x"]}}}`)
	m := s.recvMessage()
	if m["method"] != "elicitation/create" {
		t.Fatalf("want elicitation/create, got %v", m)
	}
	id, _ := json.Marshal(m["id"])
	s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"accept","content":{"decision":"once"}}}`)
	res := s.recvMessage()
	text := resultText(t, res)
	var structured struct {
		ExitCode int    `json:"exit_code"`
		Stderr   string `json:"stderr"`
		Note     string `json:"sandbox_note"`
	}
	b, _ := json.Marshal(res["result"].(map[string]any)["structuredContent"])
	if err := json.Unmarshal(b, &structured); err != nil || structured.ExitCode == 0 || !strings.Contains(structured.Stderr, "Read-only file system") {
		t.Fatalf("want the write refused (%v): %v", err, res)
	}
	for what, s := range map[string]string{"text": text, "structuredContent": structured.Note} {
		wantAll(t, what, s, "This may be the sandbox (profile", "writes are allowed only inside the workspace", "in the [shell] table")
	}
}
