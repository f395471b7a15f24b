package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A refused approval says what happened, once (issue 24, item 2): a
// person's deny is theirs and comes without advice on getting around it;
// a decline faster than anyone could read is the client's own, and only
// then does troupe name Codex exec and say how to allow the tool.
func TestRefusalSaysWhoDeclined(t *testing.T) {
	fx := newFixture(t)
	file := downstreamConfig(t, `
[mcp.stamp]
command = "touch"
args = ["stamped.txt"]
description = "Leaves a stamp; needs approval (the default)."
side_effects = []
`)
	s := startServer(t, fx.dir, "--config", file)
	s.initializeAs(`{"elicitation":{"form":{}}}`)

	// refused calls stamp, answers troupe's approval request with answer
	// after wait, and returns the text of the call's result.
	refused := func(id int, wait time.Duration, answer string) string {
		t.Helper()
		s.send(`{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"name":"stamp","arguments":{}}}`)
		m := s.recvMessage()
		if m["method"] != "elicitation/create" {
			t.Fatalf("want elicitation/create, got %v", m)
		}
		time.Sleep(wait)
		reqID, _ := json.Marshal(m["id"])
		s.send(`{"jsonrpc":"2.0","id":` + string(reqID) + `,"result":` + answer + `}`)
		res := s.recvMessage()
		if !isToolError(res) {
			t.Fatalf("want a refusal, got %v", res)
		}
		return resultText(t, res)
	}

	t.Run("a person chose deny", func(t *testing.T) {
		text := refused(2, 1200*time.Millisecond, `{"action":"accept","content":{"decision":"deny"}}`)
		wantAll(t, "stamp", text, "stamp was not run: the person at the client chose deny when asked to approve it.")
		for _, not := range []string{"was chose", "Codex exec", "requires_approval", "approvals.trust"} {
			if strings.Contains(text, not) {
				t.Errorf("a person's deny says %q:\n%s", not, text)
			}
		}
	})
	t.Run("the client declined at once", func(t *testing.T) {
		text := refused(3, 0, `{"action":"decline"}`)
		wantAll(t, "stamp", text,
			"stamp was not run: the client declined the approval request",
			"too soon for anyone to have read it",
			"Codex exec",
			`requires_approval = false in its [mcp."stamp"] table`)
		if strings.Count(text, "declined") != 1 {
			t.Errorf("the refusal says declined more than once:\n%s", text)
		}
	})
	if fileExists(fx.dir, "stamped.txt") {
		t.Fatal("a refused stamp ran")
	}
}
