package mcphttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/actors"
	"troupe/gate/approvalstate"
	"troupe/protocol"
	"troupe/tools"
)

// approvedTool needs a person's approval and counts its runs.
type approvedTool struct{ runs *atomic.Int32 }

func (a approvedTool) Spec() tools.Spec {
	return tools.Spec{Name: "risky", Description: "changes things",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		Safety:      tools.Safety{RequiresApproval: true, SideEffects: []string{"filesystem"}}}
}

func (a approvedTool) Call(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
	a.runs.Add(1)
	return textResult("ran"), nil
}

// elicitMeta is modernMeta with the elicitation capability declared.
func elicitMeta() string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` +
		`{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
}

// Over HTTP a 2026-07-28 call that needs approval gets input_required (once
// or deny only: no session to remember more in) with a state bound to the
// bearer credential; the retry with "once" runs it once; a replayed state,
// one presented with another credential or other arguments, and "deny" run
// nothing; a request without elicitation gets -32021 with status 400.
func TestModernApprovalThroughMRTR(t *testing.T) {
	var runs atomic.Int32
	sealer, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigConfig{tools: []tools.Tool{approvedTool{&runs}}, opts: Options{BearerToken: "alpha"},
		session: actors.SessionOptions{Approvals: sealer}})
	r.token = "alpha"

	ask := func(id int, args string) string {
		t.Helper()
		status, m, b := postRisky(t, r, id, args, "", elicitMeta())
		var ir struct {
			ResultType    string `json:"resultType"`
			RequestState  string `json:"requestState"`
			InputRequests map[string]struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			} `json:"inputRequests"`
		}
		if status != http.StatusOK || m.Error != nil || json.Unmarshal(m.Result, &ir) != nil ||
			ir.ResultType != "input_required" || ir.RequestState == "" || ir.InputRequests["approval"].Method != "elicitation/create" {
			t.Fatalf("want input_required: %d %s", status, b)
		}
		form := string(ir.InputRequests["approval"].Params)
		if !strings.Contains(form, `"once"`) || !strings.Contains(form, `"deny"`) || strings.Contains(form, `"session"`) {
			t.Fatalf("HTTP form must offer once and deny only: %s", form)
		}
		return ir.RequestState
	}
	// retry reports whether the retry was refused: a tool error (a
	// person's "deny") or, for a state that fails verification, -32602.
	retry := func(id int, args, state, decision string) (bool, []byte) {
		t.Helper()
		extra := fmt.Sprintf(`,"requestState":%q,"inputResponses":{"approval":{"action":"accept","content":{"decision":%q}}}`, state, decision)
		status, m, b := postRisky(t, r, id, args, extra, elicitMeta())
		if m.Error != nil && m.Error.Code == protocol.CodeInvalidParams {
			return true, b
		}
		if status != http.StatusOK || m.Error != nil {
			t.Fatalf("retry: %d %s", status, b)
		}
		var res protocol.CallToolResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatal(err)
		}
		return res.IsError, b
	}

	state := ask(1, `{"n":1}`)
	if runs.Load() != 0 {
		t.Fatal("ran before approval")
	}
	if isErr, b := retry(2, `{"n":1}`, state, "once"); isErr || runs.Load() != 1 {
		t.Fatalf("approved retry: runs=%d %s", runs.Load(), b)
	}
	if isErr, b := retry(3, `{"n":1}`, state, "once"); !isErr || !strings.Contains(string(b), "already used") || runs.Load() != 1 {
		t.Fatalf("replayed: runs=%d %s", runs.Load(), b)
	}
	state = ask(4, `{"n":1}`)
	if isErr, b := retry(5, `{"n":2}`, state, "once"); !isErr || !strings.Contains(string(b), "another call") || runs.Load() != 1 {
		t.Fatalf("other arguments: runs=%d %s", runs.Load(), b)
	}
	if isErr, b := retry(6, `{"n":1}`, state, "session"); !isErr || runs.Load() != 1 {
		t.Fatalf("a choice not offered: runs=%d %s", runs.Load(), b)
	}
	state = ask(7, `{"n":1}`)
	if isErr, b := retry(8, `{"n":1}`, state, "deny"); !isErr || runs.Load() != 1 {
		t.Fatalf("denied: runs=%d %s", runs.Load(), b)
	}
	state = ask(9, `{"n":1}`)
	r.h.SetAuth(namedTokens("another", "beta"))
	r.token = "beta"
	if isErr, b := retry(10, `{"n":1}`, state, "once"); !isErr || !strings.Contains(string(b), "another caller") || runs.Load() != 1 {
		t.Fatalf("another credential: runs=%d %s", runs.Load(), b)
	}

	status, m, b := postRisky(t, r, 11, `{"n":1}`, "", modernMeta("2026-07-28", ""))
	if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != protocol.CodeMissingCapability ||
		!strings.Contains(string(b), `"requiredCapabilities":{"elicitation":{}}`) || runs.Load() != 0+1 {
		t.Fatalf("without elicitation: %d %s", status, b)
	}
}

func postRisky(t *testing.T, r *rig, id int, args, extra, meta string) (int, rpcMessage, []byte) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"risky","arguments":%s%s,%s}}`,
		id, args, extra, meta)
	resp, b := r.post("", body, modernHeaders("tools/call", "risky")...)
	return resp.StatusCode, decode(t, b), b
}
