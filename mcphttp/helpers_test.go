package mcphttp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"troupe/actors"
	"troupe/actors/httptransport"
	"troupe/auth"
	"troupe/protocol"
	"troupe/tools"
)

// The test suite drives a real Handler over loopback HTTP (httptest binds
// 127.0.0.1), backed by a real actors.Host with small fake tools. These
// helpers build that rig and speak just enough MCP to exercise it.

const (
	acceptBoth = "application/json, text/event-stream"
	acceptJSON = "application/json"
	acceptSSE  = "text/event-stream"
)

// rig is one Host, one Handler and one loopback server.
type rig struct {
	t       *testing.T
	host    *actors.Host
	h       *Handler
	srv     *httptest.Server
	url     string // the MCP endpoint
	base    string // scheme://host:port
	client  *http.Client
	tr      *http.Transport
	token   string       // sent as the bearer token when set
	active  atomic.Int64 // requests the handler is serving
	closing sync.Once
}

// rigConfig configures newRig; the zero value serves the test tools with
// default options.
type rigConfig struct {
	opts  Options
	http  actors.HTTPOptions
	tools []tools.Tool
	// session overrides (the registry is always filled in by newRig)
	session actors.SessionOptions
}

func testLogger() *slog.Logger {
	if !testing.Verbose() || os.Getenv("TROUPE_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newHost(t testing.TB, cfg rigConfig) *actors.Host {
	t.Helper()
	reg, err := tools.NewRegistry(cfg.tools...)
	if err != nil {
		t.Fatal(err)
	}
	so := cfg.session
	so.Registry = reg
	so.ServerInfo = protocol.Implementation{Name: "troupe-test", Version: "0"}
	return actors.NewHost(actors.Options{Session: so, HTTP: cfg.http, Grace: 2 * time.Second, Logger: testLogger()})
}

// newRig starts a Host and a Handler behind an httptest server and closes
// all of it when the test ends.
func newRig(t *testing.T, cfg rigConfig) *rig {
	t.Helper()
	if cfg.tools == nil {
		cfg.tools = []tools.Tool{echoTool()}
	}
	host := newHost(t, cfg)
	if cfg.opts.Logger == nil {
		cfg.opts.Logger = testLogger()
	}
	h := New(host, cfg.opts)
	r := &rig{t: t, host: host, h: h}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.active.Add(1)
		defer r.active.Add(-1)
		h.ServeHTTP(w, req)
	}))
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	r.srv, r.base, r.url, r.tr = srv, srv.URL, srv.URL+h.opts.Path, tr
	r.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(r.close)
	return r
}

// close ends every connection (so open SSE streams return), the server
// and the Host, in that order.
func (r *rig) close() {
	r.closing.Do(func() {
		r.tr.CloseIdleConnections()
		r.srv.CloseClientConnections()
		r.srv.Close()
		if !r.host.Close(5 * time.Second) {
			r.t.Error("tool goroutines still running after Host.Close")
		}
	})
}

// do sends one request to the MCP endpoint; headers are name, value pairs.
// A header given with an empty value is removed (to send a request without
// the defaults below).
func (r *rig) do(method, session, body string, headers ...string) *http.Response {
	r.t.Helper()
	resp, err := r.client.Do(r.request(context.Background(), method, session, body, headers...))
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	return resp
}

func (r *rig) request(ctx context.Context, method, session, body string, headers ...string) *http.Request {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.url, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", acceptBoth)
	} else if method == http.MethodGet {
		req.Header.Set("Accept", acceptSSE)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// post sends a JSON-RPC body and returns the response with its body read.
func (r *rig) post(session, body string, headers ...string) (*http.Response, []byte) {
	r.t.Helper()
	resp := r.do(http.MethodPost, session, body, headers...)
	return resp, readAll(r.t, resp)
}

func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return b
}

func initBody(version string) string {
	return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"mcphttp-test","version":"1"}}}`
}

// initialize makes a session (initialize, then notifications/initialized)
// and returns its id.
func (r *rig) initialize(version string) string {
	r.t.Helper()
	resp, body := r.post("", initBody(version))
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	m := decode(r.t, body)
	if m.Error != nil {
		r.t.Fatalf("initialize failed: %s", body)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		r.t.Fatalf("initialize answered without Mcp-Session-Id")
	}
	resp, body = r.post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusAccepted {
		r.t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, body)
	}
	return id
}

// deleteSession ends a session and expects 204.
func (r *rig) deleteSession(id string) {
	r.t.Helper()
	resp := r.do(http.MethodDelete, id, "")
	body := readAll(r.t, resp)
	if resp.StatusCode != http.StatusNoContent {
		r.t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
}

// idle reports whether no session and no 2026-07-28 request or
// subscription holds a slot.
func (h *Handler) idle() bool {
	n, subs := h.statelessInFlight()
	return h.Sessions() == 0 && n == 0 && subs == 0
}

// session is the actors' handle on a live session (nil when unknown).
func (r *rig) session(id string) *httptransport.Handle {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.h.sessions[id]
}

// rpcMessage is one decoded JSON-RPC message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decode(t testing.TB, b []byte) rpcMessage {
	t.Helper()
	var m rpcMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON-RPC message: %q: %v", b, err)
	}
	return m
}

// toolText is the text of a tools/call result.
func toolText(t testing.TB, m rpcMessage) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("tools/call failed: %d %s", m.Error.Code, m.Error.Message)
	}
	var r protocol.CallToolResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatalf("result %s: %v", m.Result, err)
	}
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func callBody(id any, tool string, args string, progressToken any) string {
	idJSON, _ := json.Marshal(id)
	meta := ""
	if progressToken != nil {
		tok, _ := json.Marshal(progressToken)
		meta = `,"_meta":{"progressToken":` + string(tok) + `}`
	}
	if args == "" {
		args = "{}"
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`,
		idJSON, tool, args, meta)
}

// sseEvent is one event of a text/event-stream body.
type sseEvent struct {
	ID    string
	Event string
	Data  string
}

// sseReader reads events and comments from an SSE body.
type sseReader struct {
	sc       *bufio.Scanner
	comments int
}

func newSSEReader(body io.Reader) *sseReader {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	return &sseReader{sc: sc}
}

// next returns the next event; ok is false at the end of the stream.
// Comment lines are counted, not returned.
func (s *sseReader) next() (e sseEvent, ok bool, err error) {
	var data []string
	started := false
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if started {
				e.Data = strings.Join(data, "\n")
				return e, true, nil
			}
		case strings.HasPrefix(line, ":"):
			s.comments++
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			started = true
			switch field {
			case "id":
				e.ID = value
			case "event":
				e.Event = value
			case "data":
				data = append(data, value)
			case "retry":
			default:
				return e, false, fmt.Errorf("unknown SSE field %q", field)
			}
		}
	}
	if started {
		return e, false, fmt.Errorf("stream ended inside an event")
	}
	return e, false, s.sc.Err()
}

// readEvents reads a whole SSE body.
func readEvents(t testing.TB, body io.Reader) []sseEvent {
	t.Helper()
	rd := newSSEReader(body)
	var out []sseEvent
	for {
		e, ok, err := rd.next()
		if err != nil {
			t.Fatalf("reading SSE: %v", err)
		}
		if !ok {
			return out
		}
		out = append(out, e)
	}
}

// eventSeq splits an event id "<stream>-<seq>".
func eventSeq(t testing.TB, id string) (stream string, seq int) {
	t.Helper()
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		t.Fatalf("event id %q is not <stream>-<seq>", id)
	}
	if _, err := fmt.Sscan(id[i+1:], &seq); err != nil {
		t.Fatalf("event id %q: %v", id, err)
	}
	return id[:i], seq
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Fake tools.

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

// echoTool answers with its arguments.
func echoTool() tools.Tool {
	return funcTool{name: "echo", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		return textResult("echo " + string(req.Arguments)), nil
	}}
}

// progressTool reports progress twice, logs once, then answers.
func progressTool() tools.Tool {
	return funcTool{name: "progress", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		req.Progress(1, 2, "half")
		req.Log(protocol.LevelError, "a log line")
		req.Progress(2, 2, "all")
		return textResult("progressed"), nil
	}}
}

// blockTool reports progress, says it started, and blocks until its
// context ends (reported on cancelled) or release is closed.
func blockTool(started, cancelled chan<- struct{}, release <-chan struct{}) tools.Tool {
	return funcTool{name: "block", call: func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		req.Progress(1, 2, "started")
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-ctx.Done():
			if cancelled != nil {
				cancelled <- struct{}{}
			}
			return nil, ctx.Err()
		case <-release:
			req.Progress(2, 2, "released")
			return textResult("released"), nil
		}
	}}
}

// len is how many sessions are pooled (tests ask).
func (p *sessionPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, list := range p.idle {
		n += len(list)
	}
	return n
}

// namedTokens is an auth chain of static tokens given as name, token pairs.
func namedTokens(pairs ...string) *auth.Chain {
	var ts []auth.StaticToken
	for i := 0; i+1 < len(pairs); i += 2 {
		ts = append(ts, auth.StaticToken{Name: pairs[i], Token: pairs[i+1]})
	}
	return &auth.Chain{Tokens: auth.NewTokens(ts)}
}
