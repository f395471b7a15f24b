package actors

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/gate/approvalstate"
	"troupe/protocol"
	"troupe/tools"
)

// newSealer is a Sealer under a fresh key with a minute's TTL.
func newSealer(t *testing.T) *approvalstate.Sealer {
	t.Helper()
	s, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// inputRequired is an input_required result as the client reads it.
type inputRequired struct {
	ResultType    string `json:"resultType"`
	RequestState  string `json:"requestState"`
	InputRequests map[string]struct {
		Method string                       `json:"method"`
		Params protocol.ElicitRequestParams `json:"params"`
	} `json:"inputRequests"`
}

// askModern sends a 2026-07-28 tools/call of risky with args and reads the
// input_required result it must get.
func askModern(t *testing.T, c *client, id int, args map[string]any) inputRequired {
	t.Helper()
	c.request(id, "tools/call", modernParams(map[string]any{"name": "risky", "arguments": args}, ""))
	m := c.recv()
	var ir inputRequired
	if m.Error != nil || json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" || ir.RequestState == "" {
		t.Fatalf("want input_required, got %s", m.raw)
	}
	return ir
}

// retryModern answers an input_required with decision under state.
func retryModern(c *client, id int, args map[string]any, state, decision string) {
	c.request(id, "tools/call", modernParams(map[string]any{"name": "risky", "arguments": args,
		"requestState": state, "inputResponses": map[string]any{"approval": map[string]any{
			"action": "accept", "content": map[string]any{"decision": decision}}}}, ""))
}

// Over stdio a 2026-07-28 call that needs approval gets input_required with
// the handshake era's form (once, this connection, deny) and a sealed
// state; the retry with "once" runs it once, "deny" does not, and a
// replayed, tampered or re-targeted state is refused with nothing run.
func TestStatelessApprovalThroughMRTROnStdio(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{Session: SessionOptions{Approvals: newSealer(t)}}, gatedTool{name: "risky", runs: &runs})
	args := map[string]any{"token": "a"}

	ir := askModern(t, c, 1, args)
	req, ok := ir.InputRequests["approval"]
	if !ok || req.Method != "elicitation/create" || !strings.Contains(req.Params.Message, "risky") {
		t.Fatalf("input requests: %+v", ir.InputRequests)
	}
	field, _ := json.Marshal(req.Params.RequestedSchema.Properties["decision"])
	for _, want := range []string{`"once"`, `"session"`, `"deny"`, "until this client disconnects"} {
		if !strings.Contains(string(field), want) {
			t.Fatalf("stdio form lacks %s: %s", want, field)
		}
	}
	if strings.Contains(string(field), "rest of this session") {
		t.Fatalf("a 2026-07-28 form offers a session there is none of: %s", field)
	}
	if runs.Load() != 0 {
		t.Fatal("the tool ran before approval")
	}

	retryModern(c, 2, args, ir.RequestState, "once")
	if r := c.toolResult(c.recv()); r.IsError || runs.Load() != 1 {
		t.Fatalf("approved retry: runs=%d %+v", runs.Load(), r)
	}
	// A state that fails verification is invalid params: -32602.
	refused := func(what, want string) {
		t.Helper()
		m := c.recv()
		if m.Error == nil || m.Error.Code != protocol.CodeInvalidParams || !strings.Contains(m.Error.Message, want) || runs.Load() != 1 {
			t.Fatalf("%s: want -32602 naming %q, got %s (runs=%d)", what, want, m.raw, runs.Load())
		}
	}
	retryModern(c, 3, args, ir.RequestState, "once")
	refused("replayed state", "already used")

	ir = askModern(t, c, 4, args)
	retryModern(c, 5, map[string]any{"token": "b"}, ir.RequestState, "once")
	refused("state for other arguments", "another call")
	ir = askModern(t, c, 6, args)
	b := []byte(ir.RequestState)
	b[len(b)/2] ^= 1
	retryModern(c, 7, args, string(b), "once")
	refused("tampered state", "requestState") // forged, or no longer base64url
	retryModern(c, 8, args, ir.RequestState, "deny")
	if r := c.toolResult(c.recv()); !r.IsError || runs.Load() != 1 {
		t.Fatalf("denied: runs=%d %+v", runs.Load(), r)
	}

	// "session" trusts the tool for the rest of the connection.
	ir = askModern(t, c, 9, args)
	retryModern(c, 10, args, ir.RequestState, "session")
	if r := c.toolResult(c.recv()); r.IsError || runs.Load() != 2 {
		t.Fatalf("session approval: runs=%d %+v", runs.Load(), r)
	}
	c.request(11, "tools/call", modernParams(map[string]any{"name": "risky", "arguments": map[string]any{"token": "c"}}, ""))
	if r := c.toolResult(c.recv()); r.IsError || runs.Load() != 3 {
		t.Fatalf("call after a session approval: runs=%d %+v", runs.Load(), r)
	}
}

// A 2026-07-28 call that needs approval from a request that did not declare
// elicitation gets -32021 with requiredCapabilities, and nothing runs.
func TestStatelessApprovalWithoutElicitationIsMissingCapability(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{Session: SessionOptions{Approvals: newSealer(t)}}, gatedTool{name: "risky", runs: &runs})
	p := modernParams(map[string]any{"name": "risky", "arguments": map[string]any{}}, "")
	p["_meta"].(map[string]any)[protocol.MetaClientCapabilities] = map[string]any{}
	c.request(1, "tools/call", p)
	m := c.recv()
	if m.Error == nil || m.Error.Code != protocol.CodeMissingCapability ||
		!strings.Contains(string(m.Error.Data), `"requiredCapabilities":{"elicitation":{}}`) || runs.Load() != 0 {
		t.Fatalf("want -32021, got %s (runs=%d)", m.raw, runs.Load())
	}
}

// askingTool needs approval and asks the client one question (as a proxied
// tool relays a downstream's): a first round returns *tools.InputRequired,
// the retry reads the answer and the tool's own state from Resume.
type askingTool struct{ runs *atomic.Int32 }

func (a askingTool) Spec() tools.Spec {
	return tools.Spec{Name: "asker", Description: "asks", InputSchema: json.RawMessage(`{"type":"object"}`),
		Safety: tools.Safety{RequiresApproval: true}}
}

func (a askingTool) Call(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	a.runs.Add(1)
	if req.Resume == nil {
		return nil, &tools.InputRequired{State: []byte("tool-state-1"), Requests: map[string]json.RawMessage{
			"login": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"login?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}`)}}
	}
	return textResult("state " + string(req.Resume.State) + " answer " + string(req.Resume.Responses["login"])), nil
}

// A 2026-07-28 call whose tool asks the client something (after troupe's
// own approval) answers input_required with the tool's requests; the retry
// resumes the tool with the answer and its own state, without a second
// approval; the continuation state opens once, and a request without
// elicitation gets -32021. A retry without the approval's answer is asked
// again.
func TestStatelessToolRoundsAfterApproval(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{Session: SessionOptions{Approvals: newSealer(t)}}, askingTool{runs: &runs})
	call := func(id int, extra map[string]any) msg {
		t.Helper()
		f := map[string]any{"name": "asker", "arguments": map[string]any{}}
		maps.Copy(f, extra)
		c.request(id, "tools/call", modernParams(f, ""))
		return c.recv()
	}
	readIR := func(m msg) inputRequired {
		t.Helper()
		var ir inputRequired
		if m.Error != nil || json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" {
			t.Fatalf("want input_required, got %s", m.raw)
		}
		return ir
	}
	approval := readIR(call(1, nil))
	if _, ok := approval.InputRequests["approval"]; !ok || runs.Load() != 0 {
		t.Fatalf("first round: %+v runs=%d", approval.InputRequests, runs.Load())
	}
	again := readIR(call(2, map[string]any{"requestState": approval.RequestState, "inputResponses": map[string]any{}}))
	if _, ok := again.InputRequests["approval"]; !ok || runs.Load() != 0 {
		t.Fatalf("a retry without the answer must be asked again: %+v", again.InputRequests)
	}
	toolRound := readIR(call(3, map[string]any{"requestState": again.RequestState, "inputResponses": map[string]any{
		"approval": map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}}}))
	if q, ok := toolRound.InputRequests["login"]; !ok || q.Method != "elicitation/create" || runs.Load() != 1 {
		t.Fatalf("tool round: %+v runs=%d", toolRound.InputRequests, runs.Load())
	}
	answer := map[string]any{"requestState": toolRound.RequestState, "inputResponses": map[string]any{
		"login": map[string]any{"action": "accept", "content": map[string]any{"name": "octocat"}}}}
	m := call(4, answer)
	if r := c.toolResult(m); r.IsError || !strings.Contains(r.Content[0].Text, "state tool-state-1 answer") ||
		!strings.Contains(r.Content[0].Text, "octocat") || runs.Load() != 2 {
		t.Fatalf("resumed: %s runs=%d", m.raw, runs.Load())
	}
	if m := call(5, answer); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams || runs.Load() != 2 {
		t.Fatalf("a continuation state opens once: %s", m.raw)
	}

	// Without elicitation the tool's question cannot be put: -32021.
	p := modernParams(map[string]any{"name": "asker", "arguments": map[string]any{}}, "")
	p["_meta"].(map[string]any)[protocol.MetaClientCapabilities] = map[string]any{"sampling": map[string]any{}}
	c.request(6, "tools/call", p)
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeMissingCapability {
		t.Fatalf("want -32021, got %s", m.raw)
	}
}
