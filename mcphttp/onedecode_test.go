package mcphttp

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"troupe/actors"
	"troupe/actors/transport"
	"troupe/gate/approvalstate"
	"troupe/protocol"
	"troupe/tools"
)

// decodeCounter is middleware that records, for every request a session
// served, how many times its params were decoded by the time its handler
// returned (and the session had applied what the handler asked for).
type decodeCounter struct {
	mu   sync.Mutex
	seen []decodeSeen
}

type decodeSeen struct {
	method  string
	era     protocol.Era
	decodes int
}

func (d *decodeCounter) middleware(method string, next actors.Handler) actors.Handler {
	return func(v actors.SessionView, req *transport.Request) (any, error) {
		res, err := next(v, req)
		d.mu.Lock()
		d.seen = append(d.seen, decodeSeen{method: method, era: req.Era, decodes: req.Decodes()})
		d.mu.Unlock()
		return res, err
	}
}

func (d *decodeCounter) take() []decodeSeen {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.seen
	d.seen = nil
	return s
}

// The one-decode rule (issue 25): a 2026-07-28 tools/call over HTTP has its
// params decoded exactly once, at the HTTP front, for the whole of its way:
// the era, the _meta checks, the Mcp-Name comparison, the handler and the
// approval round's retry all read the one Request the front made. Checked
// for a plain call, for both requests of an MRTR approval round (the
// input_required answer and the retry that carries requestState and
// inputResponses), and for a handshake-era call for comparison.
func TestStatelessToolsCallDecodesParamsOnce(t *testing.T) {
	var runs atomic.Int32
	sealer, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	counter := &decodeCounter{}
	r := newRig(t, rigConfig{tools: []tools.Tool{echoTool(), approvedTool{&runs}},
		session: actors.SessionOptions{Approvals: sealer, Middleware: []actors.Middleware{counter.middleware}}})

	check := func(what string, wantMethod string) {
		t.Helper()
		seen := counter.take()
		if len(seen) != 1 {
			t.Fatalf("%s: %d requests seen by the middleware, want 1: %+v", what, len(seen), seen)
		}
		if s := seen[0]; s.method != wantMethod || s.decodes != 1 {
			t.Fatalf("%s: %s decoded its params %d times (want %s, once)", what, s.method, s.decodes, wantMethod)
		}
	}

	// A plain call.
	resp, body := r.post("", modernBody(1, "tools/call",
		`"name":"echo","arguments":{"text":"hi"},`+modernMeta("2026-07-28", "")), modernHeaders("tools/call", "echo")...)
	if resp.StatusCode != http.StatusOK || decode(t, body).Error != nil {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	check("a 2026-07-28 tools/call", "tools/call")
	if seen := counter.take(); len(seen) != 0 {
		t.Fatalf("more requests: %+v", seen)
	}

	// An MRTR approval round: input_required, then the retry.
	status, m, b := postRisky(t, r, 2, `{"n":1}`, "", elicitMeta())
	var ir struct {
		ResultType   string `json:"resultType"`
		RequestState string `json:"requestState"`
	}
	if status != http.StatusOK || json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" {
		t.Fatalf("first round: %d %s", status, b)
	}
	check("the round's first request", "tools/call")
	state, _ := json.Marshal(ir.RequestState)
	status, m, b = postRisky(t, r, 3, `{"n":1}`,
		`,"inputResponses":{"approval":{"action":"accept","content":{"decision":"once"}}},"requestState":`+string(state),
		elicitMeta())
	if status != http.StatusOK || m.Error != nil || runs.Load() != 1 {
		t.Fatalf("retry: %d runs=%d %s", status, runs.Load(), b)
	}
	check("the round's retry", "tools/call")

	// The handshake era, for comparison: the same rule holds.
	id := r.initialize("2025-11-25")
	counter.take() // initialize
	resp, body = r.post(id, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		"MCP-Protocol-Version", "2025-11-25")
	if resp.StatusCode != http.StatusOK || decode(t, body).Error != nil {
		t.Fatalf("handshake call: %d %s", resp.StatusCode, body)
	}
	check("a 2025-11-25 tools/call", "tools/call")
}
