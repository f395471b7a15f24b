package actors

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/gate/approvalstate"
	"troupe/protocol"
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
	for _, want := range []string{`"once"`, `"session"`, `"deny"`} {
		if !strings.Contains(string(field), want) {
			t.Fatalf("stdio form lacks %s: %s", want, field)
		}
	}
	if runs.Load() != 0 {
		t.Fatal("the tool ran before approval")
	}

	retryModern(c, 2, args, ir.RequestState, "once")
	if r := c.toolResult(c.recv()); r.IsError || runs.Load() != 1 {
		t.Fatalf("approved retry: runs=%d %+v", runs.Load(), r)
	}
	retryModern(c, 3, args, ir.RequestState, "once")
	if r := c.toolResult(c.recv()); !r.IsError || !strings.Contains(errorText(r), "already used") || runs.Load() != 1 {
		t.Fatalf("replayed state: runs=%d %+v", runs.Load(), r)
	}

	ir = askModern(t, c, 4, args)
	retryModern(c, 5, map[string]any{"token": "b"}, ir.RequestState, "once")
	if r := c.toolResult(c.recv()); !r.IsError || !strings.Contains(errorText(r), "another call") || runs.Load() != 1 {
		t.Fatalf("state for other arguments: runs=%d %+v", runs.Load(), r)
	}
	ir = askModern(t, c, 6, args)
	b := []byte(ir.RequestState)
	b[len(b)/2] ^= 1
	retryModern(c, 7, args, string(b), "once")
	if r := c.toolResult(c.recv()); !r.IsError || runs.Load() != 1 {
		t.Fatalf("tampered state: runs=%d %+v", runs.Load(), r)
	}
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
