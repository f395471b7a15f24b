package downstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/actors"
	"troupe/downstream"
	"troupe/mcphttp"
	"troupe/protocol"
	"troupe/tools"
)

// troupeServer runs troupe's own HTTP front (actors.Host + mcphttp) on
// loopback with the given tools and returns the MCP endpoint.
func troupeServer(t *testing.T, token string, ts ...tools.Tool) string {
	t.Helper()
	return troupeServerWrapped(t, token, nil, ts...)
}

// troupeServerWrapped is troupeServer with wrap (when not nil) around
// troupe's HTTP handler.
func troupeServerWrapped(t *testing.T, token string, wrap func(http.Handler) http.Handler, ts ...tools.Tool) string {
	t.Helper()
	reg, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	host := actors.NewHost(actors.Options{
		Session: actors.SessionOptions{Registry: reg, ServerInfo: protocol.Implementation{Name: "troupe-test", Version: "0"}},
		Grace:   2 * time.Second,
		Logger:  discard,
	})
	var h http.Handler = mcphttp.New(host, mcphttp.Options{BearerToken: token, Logger: discard})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		if !host.Close(5 * time.Second) {
			t.Error("tool goroutines still running after Host.Close")
		}
	})
	return srv.URL + "/mcp"
}

type funcTool struct {
	name string
	call func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error)
}

func (f funcTool) Spec() tools.Spec {
	return tools.Spec{Name: f.name, Description: "test tool", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (f funcTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	return f.call(ctx, req)
}

func textResult(s string) *protocol.CallToolResult {
	return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(s)}}
}

func echoTool() tools.Tool {
	return funcTool{name: "echo", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		return textResult("echo " + string(req.Arguments)), nil
	}}
}

func progressTool() tools.Tool {
	return funcTool{name: "progress", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		req.Progress(1, 2, "half")
		req.Log(protocol.LevelError, "a log line")
		req.Progress(2, 2, "all")
		return textResult("progressed"), nil
	}}
}

// askTool asks the client with elicitation/create and returns the answer.
func askTool() tools.Tool {
	return funcTool{name: "ask", call: func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		res, err := req.Client.Call(ctx, protocol.MethodElicitationCreate, map[string]any{
			"message": "may I?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}},
		})
		if err != nil {
			return textResult("client error: " + err.Error()), nil
		}
		return textResult("client said " + string(res)), nil
	}}
}

// blockTool reports progress and waits for its context; cancelled hears
// of the end.
func blockTool(cancelled chan<- struct{}) tools.Tool {
	return funcTool{name: "block", call: func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		req.Progress(1, 2, "started")
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, ctx.Err()
	}}
}

func httpConfig(url string, logs *logBuffer) downstream.Config {
	cfg := downstream.Config{Name: "remote", URL: url, ClientInfo: protocol.Implementation{Name: "troupe-test", Version: "0"},
		Headers: map[string]string{"X-Test": "1"}, Era: downstream.ForceLegacy} // the session-based transport; modern_test.go has the other
	if logs != nil {
		cfg.Logger = logs.logger()
	}
	return cfg
}

func TestHTTPListCallProgressAndLog(t *testing.T) {
	url := troupeServer(t, "", echoTool(), progressTool())
	c := dial(t, httpConfig(url, nil), downstream.Handlers{})
	if c.ServerInfo().Name != "troupe-test" || c.ProtocolVersion() != protocol.Latest {
		t.Fatalf("server %+v, version %s", c.ServerInfo(), c.ProtocolVersion())
	}
	if downstream.SessionID(c) == "" {
		t.Fatal("no session id kept from initialize")
	}
	ts, err := c.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, raw := range ts {
		var tool struct{ Name string }
		_ = json.Unmarshal(raw, &tool)
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "echo,progress" {
		t.Fatalf("tools %v", names)
	}
	if got := call(t, c, "echo", `{"a":[1.50],"b":"x"}`, downstream.Observer{}); got != `echo {"a":[1.50],"b":"x"}` {
		t.Errorf("echo: %q", got)
	}
	var o observed
	if got := call(t, c, "progress", "", o.observer("")); got != "progressed" {
		t.Errorf("progress: %q", got)
	}
	progress, logs, _ := o.snapshot()
	if strings.Join(progress, ";") != "1 2 half;2 2 all" {
		t.Errorf("progress over SSE: %q", progress)
	}
	if len(logs) != 1 || !strings.HasPrefix(logs[0], "error ") || !strings.Contains(logs[0], "a log line") {
		t.Errorf("logs over SSE: %q", logs)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestHTTPElicitationRelayed(t *testing.T) {
	url := troupeServer(t, "", askTool())
	c := dial(t, httpConfig(url, nil), downstream.Handlers{})
	var o observed
	got := call(t, c, "ask", "", o.observer(`{"action":"accept","content":{"sure":true}}`))
	if got != `client said {"action":"accept","content":{"sure":true}}` {
		t.Errorf("the tool got %q", got)
	}
	_, _, elicits := o.snapshot()
	if len(elicits) != 1 || !strings.Contains(elicits[0], "may I?") {
		t.Errorf("Elicit saw %q", elicits)
	}
	if got := call(t, c, "ask", "", downstream.Observer{}); got != `client said {"action":"decline"}` {
		t.Errorf("without Elicit the tool got %q", got)
	}
}

func TestHTTPCancellationReachesTheTool(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	url := troupeServer(t, "", blockTool(cancelled), echoTool())
	c := dial(t, httpConfig(url, nil), downstream.Handlers{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "block", nil, downstream.Observer{Progress: func(float64, float64, string) { cancel() }})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("CallTool: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CallTool did not return after its ctx ended")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool's context was not cancelled: notifications/cancelled did not arrive")
	}
	if got := call(t, c, "echo", `{}`, downstream.Observer{}); got != "echo {}" {
		t.Errorf("echo after a cancel: %q", got)
	}
}

func TestHTTPCloseDeletesTheSession(t *testing.T) {
	url := troupeServer(t, "", echoTool())
	c := dial(t, httpConfig(url, nil), downstream.Handlers{})
	id := downstream.SessionID(c)
	c.Close()
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed by Close")
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", string(protocol.Latest))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the session answered %d after Close; want 404 (deleted)", resp.StatusCode)
	}
}

func TestHTTPSessionGoneClosesDone(t *testing.T) {
	url := troupeServer(t, "", echoTool())
	c := dial(t, httpConfig(url, nil), downstream.Handlers{})
	// Somebody else ends the session (as an idle expiry or a restart would).
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", downstream.SessionID(c))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	_, err = c.CallTool(context.Background(), "echo", nil, downstream.Observer{})
	if !errors.Is(err, downstream.ErrClosed) {
		t.Fatalf("a call on a deleted session: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after a 404")
	}
	if !strings.Contains(c.Err().Error(), "404") {
		t.Errorf("Err: %v", c.Err())
	}
}

func TestHTTPGetStreamNoticesTheSessionsEnd(t *testing.T) {
	url := troupeServer(t, "", echoTool())
	c := dial(t, httpConfig(url, nil), downstream.Handlers{})
	time.Sleep(100 * time.Millisecond) // let the GET stream open
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", downstream.SessionID(c))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	select {
	case <-c.Done(): // without any call of ours
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the session ended")
	}
}

func TestHTTPBearerTokenNeverShown(t *testing.T) {
	const secret = "s3cret-token-value"
	url := troupeServer(t, secret, echoTool())
	logs := &logBuffer{}
	cfg := httpConfig(url+"?key="+secret, logs)
	cfg.BearerToken = "wrong-" + secret
	_, err := downstream.Dial(context.Background(), cfg, downstream.Handlers{})
	if err == nil {
		t.Fatal("a wrong token was accepted")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the error shows a secret: %v", err)
	}
	cfg.BearerToken = secret
	c := dial(t, cfg, downstream.Handlers{})
	if got := call(t, c, "echo", `{}`, downstream.Observer{}); got != "echo {}" {
		t.Errorf("echo: %q", got)
	}
	c.Close()
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log shows a secret:\n%s", logs)
	}
}

func TestHTTPUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := downstream.Dial(context.Background(), httpConfig(url+"/mcp", nil), downstream.Handlers{})
	if !errors.Is(err, downstream.ErrClosed) {
		t.Fatalf("Dial to a closed port: %v", err)
	}
}

// TestHTTPResumesACallStream uses a scripted server that closes a call's
// SSE stream after a priming event and delivers the response on the GET
// that resumes it, as 2025-11-25 servers may.
func TestHTTPResumesACallStream(t *testing.T) {
	var resumed, deleted atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			deleted.Add(1)
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodGet:
			if r.Header.Get("Last-Event-ID") != "call-1" {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			resumed.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: call-2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"troupe-1\",\"progress\":1}}\n\n")
			fmt.Fprint(w, "id: call-3\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"resumed\"}]}}\n\n")
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "sess-1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"scripted","version":"1"}}}`, m.ID)
		case "tools/call":
			if !strings.Contains(string(body), `"arguments":{ "z" : "<&>", "a":1.50 }`) {
				t.Errorf("the arguments were not sent byte for byte: %s", body)
			}
			if r.Header.Get("Mcp-Session-Id") != "sess-1" || r.Header.Get("MCP-Protocol-Version") != "2025-11-25" || r.Header.Get("X-Test") != "1" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: call-1\nretry: 10\ndata: \n\n") // prime, then hang up
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	c := dial(t, httpConfig(srv.URL, nil), downstream.Handlers{})
	var o observed
	if got := call(t, c, "anything", `{ "z" : "<&>", "a":1.50 }`, o.observer("")); got != "resumed" {
		t.Fatalf("got %q", got)
	}
	if progress, _, _ := o.snapshot(); len(progress) != 1 {
		t.Errorf("progress on the resumed stream: %q", progress)
	}
	if resumed.Load() != 1 {
		t.Errorf("resumed %d times", resumed.Load())
	}
	c.Close()
	if deleted.Load() != 1 {
		t.Errorf("DELETE sent %d times", deleted.Load())
	}
}

// askOutsideTool asks its question as the conformance suite's fixture
// server does (a request that names no call of the client's, so the HTTP
// front sends it on the standalone GET stream, not the call's POST stream).
func askOutsideTool() tools.Tool {
	return funcTool{name: "ask-outside", call: func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		res, err := req.Session.Client().Call(ctx, protocol.MethodElicitationCreate, map[string]any{
			"message": "may I?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}},
		})
		if err != nil {
			return textResult("client error: " + err.Error()), nil
		}
		return textResult("client said " + string(res)), nil
	}}
}

// TestHTTPElicitationOnTheGetStreamReachesTheCall: a server's question
// that arrives on the standalone GET stream while one call is in flight is
// that call's (the stdio rule: a question that names no call belongs to
// the one call that is not already waiting for an answer), not declined.
func TestHTTPElicitationOnTheGetStreamReachesTheCall(t *testing.T) {
	// The question goes out only once the GET stream is open: the test
	// waits for it (the front has filed the stream when it writes the
	// response's headers).
	opened := make(chan struct{}, 1)
	url := troupeServerWrapped(t, "", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				w = &headersSignal{ResponseWriter: w, once: opened}
			}
			next.ServeHTTP(w, r)
		})
	}, askOutsideTool())
	c := dial(t, httpConfig(url, nil), downstream.Handlers{})
	select {
	case <-opened:
	case <-time.After(5 * time.Second):
		t.Fatal("the client opened no GET stream")
	}
	var o observed
	got := call(t, c, "ask-outside", "", o.observer(`{"action":"accept","content":{"sure":true}}`))
	if got != `client said {"action":"accept","content":{"sure":true}}` {
		t.Errorf("the tool got %q", got)
	}
	if _, _, elicits := o.snapshot(); len(elicits) != 1 || !strings.Contains(elicits[0], "may I?") {
		t.Errorf("Elicit saw %q", elicits)
	}
}

// headersSignal tells once when its response's headers are written.
type headersSignal struct {
	http.ResponseWriter
	once chan struct{}
}

func (h *headersSignal) WriteHeader(code int) {
	h.ResponseWriter.WriteHeader(code)
	select {
	case h.once <- struct{}{}:
	default:
	}
}

func (h *headersSignal) Write(b []byte) (int, error) {
	select {
	case h.once <- struct{}{}:
	default:
	}
	return h.ResponseWriter.Write(b)
}

// Flush passes flushes on: the front streams SSE.
func (h *headersSignal) Flush() {
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
