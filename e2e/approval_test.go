package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The approval gate, driven by the TypeScript SDK's elicitation handler:
// the same scenario over stdio and over HTTP.

// approvalScenario is the steps and the answers a person gives.
func approvalScenario(tr transport) scenario {
	return scenario{
		Transport: tr,
		Steps: []step{
			callTool("fs.writeFile", map[string]any{"path": "approved.txt", "content": "yes"}),  // accept once
			callTool("fs.writeFile", map[string]any{"path": "declined.txt", "content": "no"}),   // decline
			callTool("shell.exec", map[string]any{"command": []string{"sh", "-c", "echo one"}}), // accept for the session
			callTool("shell.exec", map[string]any{"command": []string{"sh", "-c", "echo two"}}), // trusted: not asked
			callTool("fs.writeFile", map[string]any{"path": "expired.txt", "content": "late"}),  // never answered
			callTool("fs.writeFile", map[string]any{"path": "cancelled.txt", "content": "x"}),   // cancel
		},
		Elicitation: []map[string]any{
			{"action": "accept", "content": map[string]any{"decision": "once"}},
			{"action": "decline"},
			{"action": "accept", "content": map[string]any{"decision": "session"}},
			{"never": true},
			{"action": "cancel"},
		},
	}
}

func checkApprovals(t *testing.T, dir string, res result) {
	t.Helper()
	text := func(i int) string {
		if !res.Steps[i].OK {
			t.Fatalf("step %d failed: %s", i, res.Steps[i])
		}
		return string(res.Steps[i].Result)
	}
	isError := func(i int) bool {
		var r struct {
			IsError bool `json:"isError"`
		}
		json.Unmarshal(res.Steps[i].Result, &r)
		return r.IsError
	}
	if isError(0) || !fileHas(dir, "approved.txt", "yes") {
		t.Errorf("approved write: %s", text(0))
	}
	if !isError(1) || !strings.Contains(text(1), "declined") || fileExists(dir, "declined.txt") {
		t.Errorf("declined write: %s", text(1))
	}
	if isError(2) || !strings.Contains(text(2), `one\n`) || isError(3) || !strings.Contains(text(3), `two\n`) {
		t.Errorf("session-approved shell calls: %s / %s", text(2), text(3))
	}
	if !isError(4) || !strings.Contains(text(4), "nobody answered") || fileExists(dir, "expired.txt") {
		t.Errorf("unanswered approval: %s", text(4))
	}
	if !isError(5) || !strings.Contains(text(5), "cancelled") || fileExists(dir, "cancelled.txt") {
		t.Errorf("cancelled approval: %s", text(5))
	}
	// Five questions: the trusted second shell call was not asked.
	if len(res.Elicitations) != 5 {
		t.Fatalf("%d elicitations, want 5", len(res.Elicitations))
	}
	var first struct {
		Message         string `json:"message"`
		RequestedSchema struct {
			Properties map[string]map[string]any `json:"properties"`
		} `json:"requestedSchema"`
	}
	json.Unmarshal(res.Elicitations[0], &first)
	if !strings.Contains(first.Message, "fs.writeFile") || !strings.Contains(first.Message, "approved.txt") ||
		first.RequestedSchema.Properties["decision"]["type"] != "string" {
		t.Errorf("first prompt: %s", res.Elicitations[0])
	}
}

func fileHas(dir, name, content string) bool {
	b, err := os.ReadFile(filepath.Join(dir, name))
	return err == nil && string(b) == content
}

func fileExists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

func TestTSClientApprovalsStdio(t *testing.T) {
	fx := newFixture(t)
	tr := stdioTransport(t, fx.dir)
	tr.Args = append(tr.Args, "-c", `approvals.timeout="1s"`)
	checkApprovals(t, fx.dir, runScenario(t, approvalScenario(tr)))
}

func TestTSClientApprovalsHTTP(t *testing.T) {
	requireRunner(t)
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, newToken(t), "-c", `approvals.timeout="1s"`)
	checkApprovals(t, fx.dir, runScenario(t, approvalScenario(srv.transport())))
}

// A client that cannot show approval prompts gets a refusal that says how
// to allow the tool, and nothing runs.
func TestTSClientWithoutElicitationIsRefused(t *testing.T) {
	fx := newFixture(t)
	res := runScenario(t, scenario{Transport: stdioTransport(t, fx.dir), Steps: []step{
		callTool("shell.exec", map[string]any{"command": []string{"sh", "-c", "echo hi > ran.txt"}}),
	}})
	r := string(res.Steps[0].Result)
	if !strings.Contains(r, `"isError":true`) || !strings.Contains(r, "cannot ask") || !strings.Contains(r, "high-risk") ||
		fileExists(fx.dir, "ran.txt") {
		t.Fatalf("shell.exec without elicitation: %s", r)
	}
}
