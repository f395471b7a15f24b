package mcphttp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"troupe/actors"
	"troupe/protocol"
	"troupe/tools"
)

// pingTool asks the client for a ping and reports the answer.
type pingTool struct{}

func (pingTool) Spec() tools.Spec {
	return tools.Spec{Name: "askping", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (pingTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	res, err := req.Client.Call(ctx, "ping", nil)
	if err != nil {
		return nil, err
	}
	return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("pong " + string(res))}}, nil
}

// TestServerRequestTravelsOnTheCallsStream: the server's ping goes out on
// the SSE answer of the POST that started the call, the client's response
// comes back as its own POST (202), and the call's result then ends the
// same stream.
func TestServerRequestTravelsOnTheCallsStream(t *testing.T) {
	reg, err := tools.NewRegistry(pingTool{})
	if err != nil {
		t.Fatal(err)
	}
	host := actors.NewHost(actors.Options{Session: actors.SessionOptions{Registry: reg}})
	srv := httptest.NewServer(New(host, Options{}))
	defer func() {
		srv.Close()
		host.Close(5 * time.Second)
	}()
	post := func(sid, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	resp.Body.Close()
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()

	call := post(sid, `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"askping"}}`)
	defer call.Body.Close()
	if ct := call.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("want an SSE answer, got %s", ct)
	}
	events := sseData(call.Body)
	first := <-events
	var ping struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal([]byte(first), &ping) != nil || ping.Method != "ping" {
		t.Fatalf("want the server's ping on the call's stream, got %s", first)
	}
	ack := post(sid, `{"jsonrpc":"2.0","id":`+string(ping.ID)+`,"result":{}}`)
	io.Copy(io.Discard, ack.Body)
	ack.Body.Close()
	if ack.StatusCode != http.StatusAccepted {
		t.Fatalf("a POSTed response must get 202, got %d", ack.StatusCode)
	}
	select {
	case final := <-events:
		if !strings.Contains(final, `"id":"c1"`) || !strings.Contains(final, "pong {}") {
			t.Fatalf("want the call's result after the ping, got %s", final)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no result after answering the ping")
	}
}

// sseData yields the data lines of an event stream.
func sseData(r io.Reader) <-chan string {
	out := make(chan string, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- data
			}
		}
	}()
	return out
}
