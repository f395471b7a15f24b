package actors

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"troupe/protocol"
	"troupe/tools"
)

// askTool sends method to the client and returns what came back.
func askTool(method string) tools.Tool {
	return funcTool{name: "ask", call: func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		res, err := req.Client.Call(ctx, method, map[string]any{"message": "may I?"})
		var ce *tools.ClientError
		if errors.As(err, &ce) {
			return textResult("client error: " + ce.Message), nil
		}
		if err != nil {
			return nil, err
		}
		return textResult("client said " + string(res)), nil
	}}
}

func TestServerToClientRequestRoundTrip(t *testing.T) {
	c := newClient(t, Options{}, askTool("ping"))
	c.initialize("2025-06-18")
	c.request("call", "tools/call", map[string]any{"name": "ask"})
	m := c.recv()
	if m.Method != "ping" || m.ID == nil {
		t.Fatalf("want the server's ping request, got %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"pong":true}}`)
	r := c.toolResult(c.recv())
	if r.IsError || !strings.Contains(errorText(r), `client said {"pong":true}`) {
		t.Fatalf("tool did not get the client's answer: %+v", r)
	}
}

func TestServerToClientErrorResponse(t *testing.T) {
	c := newClient(t, Options{}, askTool("ping"))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "ask"})
	m := c.recv()
	c.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"no ping here"}}`)
	if r := c.toolResult(c.recv()); !strings.Contains(errorText(r), "client error: no ping here") {
		t.Fatalf("tool did not get the client's error: %+v", r)
	}
}

func TestServerToClientNeedsCapability(t *testing.T) {
	c := newClient(t, Options{}, askTool("elicitation/create"))
	c.initialize("2025-06-18") // declares no elicitation capability
	c.request(1, "tools/call", map[string]any{"name": "ask"})
	if r := c.toolResult(c.recv()); !strings.Contains(errorText(r), "did not declare the elicitation capability") {
		t.Fatalf("elicitation sent to a client without the capability: %+v", r)
	}
}

func TestCancelledCallCancelsItsClientRequest(t *testing.T) {
	c := newClient(t, Options{}, askTool("ping"))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "ask"})
	ping := c.recv()
	c.notify("notifications/cancelled", map[string]any{"requestId": 1})
	m := c.recv()
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if m.Method != "notifications/cancelled" || json.Unmarshal(m.Params, &p) != nil || string(p.RequestID) != string(ping.ID) {
		t.Fatalf("want notifications/cancelled for the server's request %s, got %s", ping.ID, m.raw)
	}
	// A late answer to the abandoned request is ignored.
	c.send(`{"jsonrpc":"2.0","id":` + string(ping.ID) + `,"result":{}}`)
	c.request(2, "ping", nil)
	if m := c.recv(); string(m.ID) != "2" {
		t.Fatalf("want only the ping's answer, got %s", m.raw)
	}
}
