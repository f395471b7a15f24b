package actors

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/protocol"
	"troupe/tools"
)

// modernParams is a 2026-07-28 request's params: fields plus the _meta
// every request carries; level, when set, is its log threshold.
func modernParams(fields map[string]any, level string) map[string]any {
	meta := map[string]any{
		protocol.MetaProtocolVersion:    "2026-07-28",
		protocol.MetaClientCapabilities: map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
		protocol.MetaClientInfo:         map[string]any{"name": "modern", "version": "1"},
	}
	if level != "" {
		meta[protocol.MetaLogLevel] = level
	}
	p := map[string]any{"_meta": meta}
	for k, v := range fields {
		p[k] = v
	}
	return p
}

// logTool logs once at info and once at error, then answers.
func logTool() tools.Tool {
	return funcTool{name: "log", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		req.Log(protocol.LevelInfo, "info line")
		req.Log(protocol.LevelError, "error line")
		return textResult("logged"), nil
	}}
}

// The same stdio connection serves per-request (2026-07-28) calls without
// initialize: each call's own log level decides its notifications/message,
// notifications/cancelled stops a call, and results are complete.
func TestStatelessCallsOnStdio(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	c := newClient(t, Options{}, logTool(), blockTool(cancelled, nil))

	logsFor := func(id int, level string) (levels []string) {
		t.Helper()
		c.request(id, "tools/call", modernParams(map[string]any{"name": "log", "arguments": map[string]any{}}, level))
		for {
			m := c.recv()
			if m.Method == protocol.NotificationMessage {
				var p protocol.LoggingMessageParams
				_ = json.Unmarshal(m.Params, &p)
				levels = append(levels, string(p.Level))
				continue
			}
			if !strings.Contains(string(m.Result), `"resultType":"complete"`) || !strings.Contains(string(m.Result), "serverInfo") {
				t.Fatalf("call %d: %s", id, m.raw)
			}
			return levels
		}
	}
	if got := logsFor(1, ""); len(got) != 0 {
		t.Fatalf("without logLevel the call sent log messages: %v", got)
	}
	if got := logsFor(2, "error"); len(got) != 1 || got[0] != "error" {
		t.Fatalf("logLevel error: %v", got)
	}
	if got := logsFor(3, "debug"); len(got) != 2 {
		t.Fatalf("logLevel debug: %v", got)
	}

	// A running call (its progress says so) is stopped by cancellation.
	block := modernParams(map[string]any{"name": "block", "arguments": map[string]any{}}, "")
	block["_meta"].(map[string]any)["progressToken"] = "b"
	c.request(4, "tools/call", block)
	if m := c.recv(); m.Method != "notifications/progress" {
		t.Fatalf("want the call's progress first, got %s", m.raw)
	}
	c.notify("notifications/cancelled", map[string]any{"requestId": 4})
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("notifications/cancelled did not stop a 2026-07-28 call")
	}
	c.expectNothing(50 * time.Millisecond) // a cancelled call gets no answer
}

// A 2026-07-28 call to a tool that needs approval is refused when the Host
// has no approval state sealer (Options.Session.Approvals) and the tool
// never runs, even from a client that declared elicitation.
func TestStatelessCallNeedingApprovalIsRefused(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{}, gatedTool{name: "risky", runs: &runs})
	c.request(1, "tools/call", modernParams(map[string]any{"name": "risky", "arguments": map[string]any{}}, ""))
	r := c.toolResult(c.recv())
	if !r.IsError || !strings.Contains(errorText(r), "2026-07-28") || runs.Load() != 0 {
		t.Fatalf("approval over 2026-07-28: runs=%d %+v", runs.Load(), r)
	}
	c.expectNothing(50 * time.Millisecond) // and no elicitation/create was sent
}

// subscriptions/listen on stdio: acknowledged first with its id, tools list
// changes delivered with it, nothing after notifications/cancelled, and a
// graceful result for a subscription still open when the input ends.
func TestSubscriptionsListenOnStdio(t *testing.T) {
	c := newClient(t, Options{}, echoTool())
	subID := func(m msg) string {
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if m.Result != nil {
			_ = json.Unmarshal(m.Result, &p)
		}
		return string(p.Meta[protocol.MetaSubscriptionID])
	}
	c.request("sub", "subscriptions/listen", modernParams(map[string]any{
		"notifications": map[string]any{"toolsListChanged": true, "promptsListChanged": true}}, ""))
	ack := c.recv()
	if ack.Method != protocol.NotificationSubscriptionsAcknowledged || subID(ack) != `"sub"` ||
		!strings.Contains(string(ack.Params), `"notifications":{"toolsListChanged":true}`) {
		t.Fatalf("acknowledgment: %s", ack.raw)
	}
	next, err := tools.NewRegistry(echoTool(), logTool())
	if err != nil {
		t.Fatal(err)
	}
	c.host.SetRegistry(next)
	if m := c.recv(); m.Method != protocol.NotificationToolsListChanged || subID(m) != `"sub"` {
		t.Fatalf("want tools/list_changed for the subscription, got %s", m.raw)
	}
	c.notify("notifications/cancelled", map[string]any{"requestId": "sub"})
	c.request(1, "tools/list", modernParams(nil, "")) // ordered behind the cancellation
	if m := c.recv(); m.Result == nil {
		t.Fatalf("tools/list: %s", m.raw)
	}
	again, _ := tools.NewRegistry(echoTool())
	c.host.SetRegistry(again)
	c.expectNothing(50 * time.Millisecond)

	c.request("sub2", "subscriptions/listen", modernParams(map[string]any{"notifications": map[string]any{}}, ""))
	if m := c.recv(); !strings.Contains(string(m.Params), `"notifications":{}`) {
		t.Fatalf("acknowledgment of an empty filter: %s", m.raw)
	}
	c.closeInput()
	if m := c.recv(); string(m.ID) != `"sub2"` || subID(m) != `"sub2"` || !strings.Contains(string(m.Result), `"resultType":"complete"`) {
		t.Fatalf("want the subscription's graceful end, got %s", m.raw)
	}
}
