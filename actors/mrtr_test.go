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
	if _, ok := again.InputRequests["approval"]; !ok || runs.Load() != 0 || again.RequestState != approval.RequestState {
		t.Fatalf("a retry without the answer must be asked again, under the same state: %+v", again.InputRequests)
	}
	toolRound := readIR(call(3, map[string]any{"requestState": again.RequestState, "inputResponses": map[string]any{
		"approval": map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}}}))
	if q, ok := toolRound.InputRequests["login"]; !ok || q.Method != "elicitation/create" || runs.Load() != 1 {
		t.Fatalf("tool round: %+v runs=%d", toolRound.InputRequests, runs.Load())
	}
	// A retry that answers none of the tool's questions is told so and
	// spends nothing: the state still carries the answer afterwards.
	if m := call(30, map[string]any{"requestState": toolRound.RequestState}); m.Error == nil ||
		m.Error.Code != protocol.CodeInvalidParams || !strings.Contains(m.Error.Message, "same requestState") || runs.Load() != 1 {
		t.Fatalf("a tool round's retry without answers: %s runs=%d", m.raw, runs.Load())
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

// A retry that carries a requestState and no answer spends nothing: it is
// asked again under the very same state, so one caller's flood of such
// retries neither fills the memory of used states nor blocks any other
// caller's approval (issue 23: 4,096 of them once refused every caller's
// approvals for approvals.timeout). Two stdio connections on one process
// are two callers sharing one Sealer.
func TestAnswerlessRetriesSpendNothing(t *testing.T) {
	sealer, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: time.Minute, MaxOutstanding: 8})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	a := newClient(t, Options{Session: SessionOptions{Approvals: sealer}}, gatedTool{name: "risky", runs: &runs})
	b := newClientOnHost(t, a.host)
	args := map[string]any{"token": "a"}

	ir := askModern(t, a, 1, args)
	state := ir.RequestState
	for i := range 32 { // the attack: each retry sends the state the last one got
		a.request(100+i, "tools/call", modernParams(map[string]any{"name": "risky", "arguments": args,
			"requestState": state}, ""))
		m := a.recv()
		var again inputRequired
		if m.Error != nil || json.Unmarshal(m.Result, &again) != nil || again.ResultType != "input_required" {
			t.Fatalf("answer-less retry %d: want input_required, got %s", i, m.raw)
		}
		if again.RequestState != ir.RequestState {
			t.Fatalf("answer-less retry %d was answered with a fresh state", i)
		}
		state = again.RequestState
		if _, ok := again.InputRequests["approval"]; !ok {
			t.Fatalf("answer-less retry %d: the approval is not asked again: %s", i, m.raw)
		}
	}
	if n := sealer.Outstanding(); n > 1 {
		t.Fatalf("answer-less retries left %d states outstanding, want at most the one issued", n)
	}

	irB := askModern(t, b, 1, args)
	retryModern(b, 2, args, irB.RequestState, "once")
	if r := b.toolResult(b.recv()); r.IsError || runs.Load() != 1 {
		t.Fatalf("the other caller's approval: runs=%d %+v", runs.Load(), r)
	}
	retryModern(a, 200, args, ir.RequestState, "once")
	if r := a.toolResult(a.recv()); r.IsError || runs.Load() != 2 {
		t.Fatalf("the flooding caller's own state, answered at last: runs=%d %+v", runs.Load(), r)
	}
}

// A caller with its share of approval states outstanding is refused
// alone: -32000 saying it is that caller's limit, with the bound in data;
// answering ("deny") its own states and asking again mints nothing more
// before they expire; the other caller's approval goes through all along.
func TestApprovalStatesPerCallerShare(t *testing.T) {
	sealer, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: time.Minute, MaxPerCaller: 4})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	a := newClient(t, Options{Session: SessionOptions{Approvals: sealer}}, gatedTool{name: "risky", runs: &runs})
	b := newClientOnHost(t, a.host)
	args := map[string]any{"token": "a"}

	var states []string
	for i := range 4 {
		states = append(states, askModern(t, a, i+1, args).RequestState)
	}
	refusedAlone := func(what string) {
		t.Helper()
		a.request(50, "tools/call", modernParams(map[string]any{"name": "risky", "arguments": args}, ""))
		m := a.recv()
		if m.Error == nil || m.Error.Code != protocol.CodeServerBusy || !strings.Contains(m.Error.Message, "this caller") ||
			!strings.Contains(m.Error.Message, "its limit") || !strings.Contains(string(m.Error.Data), `"scope":"caller"`) ||
			!strings.Contains(string(m.Error.Data), `"limit":4`) {
			t.Fatalf("%s: want -32000 naming this caller's limit, got %s", what, m.raw)
		}
	}
	refusedAlone("past its share")

	irB := askModern(t, b, 1, args)
	retryModern(b, 2, args, irB.RequestState, "once")
	if r := b.toolResult(b.recv()); r.IsError || runs.Load() != 1 {
		t.Fatalf("the other caller beside one at its limit: runs=%d %+v", runs.Load(), r)
	}

	for i, st := range states {
		retryModern(a, 60+i, args, st, "deny")
		if r := a.toolResult(a.recv()); !r.IsError {
			t.Fatalf("deny: %+v", r)
		}
		refusedAlone("after denying its own state")
	}
	irB = askModern(t, b, 3, args)
	retryModern(b, 4, args, irB.RequestState, "once")
	if r := b.toolResult(b.recv()); r.IsError || runs.Load() != 2 {
		t.Fatalf("the other caller after the churn: runs=%d %+v", runs.Load(), r)
	}
}
