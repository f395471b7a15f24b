package mcphttp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors"
	"troupe/actors/httptransport"
	"troupe/actors/transport"
	"troupe/tools"
)

// checkRefusal asserts the shape of every transport-level refusal: JSON,
// a JSON-RPC error object (code and message), and no session id.
func checkRefusal(t *testing.T, resp *http.Response, body []byte, wantCode int64) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("a refusal carries Mcp-Session-Id %q", resp.Header.Get("Mcp-Session-Id"))
	}
	var m struct {
		JSONRPC string `json:"jsonrpc"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || json.Unmarshal(body, &members) != nil {
		t.Fatalf("body is not a JSON object: %q", body)
	}
	if _, hasID := members["id"]; m.JSONRPC != "2.0" || m.Error == nil || m.Result != nil || !hasID {
		t.Fatalf("body is not a JSON-RPC error response with an id member: %s", body)
	}
	if m.Error.Code != wantCode {
		t.Errorf("error code = %d, want %d (%s)", m.Error.Code, wantCode, body)
	}
	if m.Error.Message == "" {
		t.Errorf("error without a message: %s", body)
	}
}

// TestProtocolRules walks the transport's rules one request at a time:
// status, the headers that go with it, and the body.
func TestProtocolRules(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{CheckHost: true, MaxBodyBytes: 1024}})
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	const refused = -32000 // the code of the handler's own refusals

	type want struct {
		status int
		code   int64  // JSON-RPC error code of a refusal; 0: not a refusal
		body   string // for non-refusals: exact body ("" means empty)
		header [2]string
	}
	cases := []struct {
		name    string
		method  string
		path    string // default: the MCP endpoint
		session string // "live": a fresh initialized session; "unknown": a made-up id
		version string // of the live session (default 2025-06-18)
		body    string
		headers []string
		want    want
	}{
		{name: "ping", method: "POST", session: "live", body: ping,
			want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`, header: [2]string{"Content-Type", "application/json"}}},
		{name: "ping accepting only JSON", method: "POST", session: "live", body: ping, headers: []string{"Accept", acceptJSON},
			want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "no Content-Type", method: "POST", session: "live", body: ping, headers: []string{"Content-Type", ""},
			want: want{status: 415, code: refused}},
		{name: "text/plain", method: "POST", session: "live", body: ping, headers: []string{"Content-Type", "text/plain"},
			want: want{status: 415, code: refused}},
		{name: "JSON with charset", method: "POST", session: "live", body: ping,
			headers: []string{"Content-Type", "application/json; charset=utf-8"}, want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "Accept text/html", method: "POST", session: "live", body: ping, headers: []string{"Accept", "text/html"},
			want: want{status: 406, code: refused}},
		{name: "body over the limit", method: "POST", session: "live",
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 2048) + `"}}`,
			want: want{status: 413, code: refused}},
		{name: "malformed JSON", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":1,`,
			want: want{status: 400, code: jsonrpc2.CodeParseError}},
		{name: "malformed JSON without a session", method: "POST", body: `{"jsonrpc"`,
			want: want{status: 400, code: jsonrpc2.CodeParseError}},
		{name: "empty body", method: "POST", session: "live", body: "",
			want: want{status: 400, code: jsonrpc2.CodeParseError}},
		{name: "invalid UTF-8", method: "POST", session: "live", body: "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
			want: want{status: 400, code: jsonrpc2.CodeParseError}},
		{name: "wrong jsonrpc version", method: "POST", session: "live", body: `{"jsonrpc":"1.0","id":1,"method":"ping"}`,
			want: want{status: 400, code: jsonrpc2.CodeInvalidRequest}},
		{name: "null id", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":null,"method":"ping"}`,
			want: want{status: 400, code: jsonrpc2.CodeInvalidRequest}},
		{name: "fractional id", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
			want: want{status: 400, code: jsonrpc2.CodeInvalidRequest}},
		{name: "negative id", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":-1,"method":"ping"}`,
			want: want{status: 400, code: jsonrpc2.CodeInvalidRequest}},
		{name: "id over int64", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}`,
			want: want{status: 400, code: jsonrpc2.CodeInvalidRequest}},
		{name: "response with a malformed error", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":1,"error":"no"}`,
			want: want{status: 400, code: jsonrpc2.CodeInvalidRequest}},
		{name: "request without a session id", method: "POST", body: ping,
			want: want{status: 400, code: refused}},
		{name: "request with an unknown session id", method: "POST", session: "unknown", body: ping,
			want: want{status: 404, code: refused}},
		{name: "initialize notification without a session id", method: "POST",
			body: `{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
			want: want{status: 400, code: refused}},
		{name: "notification", method: "POST", session: "live", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			want: want{status: 202}},
		{name: "unknown notification", method: "POST", session: "live", body: `{"jsonrpc":"2.0","method":"notifications/whatever"}`,
			want: want{status: 202}},
		{name: "a response from the client", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":"srv-1","result":{}}`,
			want: want{status: 202}},
		{name: "an error response from the client", method: "POST", session: "live",
			body: `{"jsonrpc":"2.0","id":"srv-2","error":{"code":-1,"message":"declined"}}`, want: want{status: 202}},
		{name: "batch under 2025-06-18", method: "POST", session: "live", body: "[" + ping + "]",
			want: want{status: 400, code: refused}},
		{name: "batch under 2025-11-25", method: "POST", session: "live", version: "2025-11-25", body: "[" + ping + "]",
			want: want{status: 400, code: refused}},
		{name: "batch without a session", method: "POST", body: "[" + ping + "]",
			want: want{status: 400, code: refused}},
		{name: "empty batch", method: "POST", session: "live", version: "2025-03-26", body: "[]",
			want: want{status: 400, code: jsonrpc2.CodeInvalidRequest}},
		{name: "protocol version matches", method: "POST", session: "live", body: ping, headers: []string{"MCP-Protocol-Version", "2025-06-18"},
			want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "protocol version of another revision", method: "POST", session: "live", body: ping,
			headers: []string{"MCP-Protocol-Version", "2025-03-26"}, want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "protocol version unsupported", method: "POST", session: "live", body: ping,
			headers: []string{"MCP-Protocol-Version", "1999-01-01"}, want: want{status: 400, code: refused}},
		{name: "protocol version garbage on GET", method: "GET", session: "live",
			headers: []string{"MCP-Protocol-Version", "x"}, want: want{status: 400, code: refused}},
		{name: "protocol version on 2024-11-05", method: "POST", session: "live", version: "2024-11-05", body: ping,
			headers: []string{"MCP-Protocol-Version", "2024-11-05"}, want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "PUT", method: "PUT", session: "live", body: ping,
			want: want{status: 405, code: refused, header: [2]string{"Allow", "GET, POST, DELETE"}}},
		{name: "PATCH without a session", method: "PATCH",
			want: want{status: 405, code: refused, header: [2]string{"Allow", "GET, POST, DELETE"}}},
		{name: "GET without Accept", method: "GET", session: "live", headers: []string{"Accept", ""},
			want: want{status: 406, code: refused}},
		{name: "GET accepting only JSON", method: "GET", session: "live", headers: []string{"Accept", acceptJSON},
			want: want{status: 406, code: refused}},
		{name: "GET without a session id", method: "GET", want: want{status: 400, code: refused}},
		{name: "GET with an unknown session id", method: "GET", session: "unknown", want: want{status: 404, code: refused}},
		{name: "GET with an unknown Last-Event-ID", method: "GET", session: "live", headers: []string{"Last-Event-ID", "p99-1"},
			want: want{status: 400, code: refused}},
		{name: "GET with a malformed Last-Event-ID", method: "GET", session: "live", headers: []string{"Last-Event-ID", "garbage"},
			want: want{status: 400, code: refused}},
		{name: "GET resuming past the end", method: "GET", session: "live", headers: []string{"Last-Event-ID", "p1-5"},
			want: want{status: 400, code: refused}},
		{name: "DELETE without a session id", method: "DELETE", want: want{status: 400, code: refused}},
		{name: "DELETE with an unknown session id", method: "DELETE", session: "unknown", want: want{status: 404, code: refused}},
		{name: "DELETE", method: "DELETE", session: "live", want: want{status: 204}},
		{name: "healthz", method: "GET", path: "/healthz", want: want{status: 200, body: "ok\n", header: [2]string{"Content-Type", "text/plain; charset=utf-8"}}},
		{name: "healthz POST", method: "POST", path: "/healthz", body: ping,
			want: want{status: 405, header: [2]string{"Allow", "GET, HEAD"}, body: "method not allowed\n"}},
		{name: "another path", method: "GET", path: "/mcp/x", want: want{status: 404, body: "404 page not found\n"}},
		{name: "loopback Origin", method: "POST", session: "live", body: ping, headers: []string{"Origin", "http://localhost:5173"},
			want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "loopback IPv4 Origin", method: "POST", session: "live", body: ping, headers: []string{"Origin", "http://127.0.0.1"},
			want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "loopback IPv6 Origin", method: "POST", session: "live", body: ping, headers: []string{"Origin", "https://[::1]:8443"},
			want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "foreign Origin", method: "POST", session: "live", body: ping, headers: []string{"Origin", "https://evil.example"},
			want: want{status: 403, code: refused}},
		{name: "foreign Origin on initialize", method: "POST", body: initBody("2025-06-18"), headers: []string{"Origin", "http://evil.example:80"},
			want: want{status: 403, code: refused}},
		{name: "null Origin", method: "POST", session: "live", body: ping, headers: []string{"Origin", "null"},
			want: want{status: 403, code: refused}},
		{name: "localhost look-alike Origin", method: "POST", session: "live", body: ping, headers: []string{"Origin", "http://localhost.evil.example"},
			want: want{status: 403, code: refused}},
		{name: "foreign Origin on GET", method: "GET", session: "live", headers: []string{"Origin", "https://evil.example"},
			want: want{status: 403, code: refused}},
		{name: "foreign Host", method: "POST", session: "live", body: ping, headers: []string{"Host", "evil.example"},
			want: want{status: 403, code: refused}},
		{name: "rebinding Host with a port", method: "POST", body: initBody("2025-06-18"), headers: []string{"Host", "attacker.example:8080"},
			want: want{status: 403, code: refused}},
		{name: "localhost Host", method: "POST", session: "live", body: ping, headers: []string{"Host", "localhost:9"},
			want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{name: "IPv6 loopback Host", method: "POST", session: "live", body: ping, headers: []string{"Host", "[::1]:80"},
			want: want{status: 200, body: `{"jsonrpc":"2.0","id":1,"result":{}}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			session := ""
			switch tc.session {
			case "live":
				v := tc.version
				if v == "" {
					v = "2025-06-18"
				}
				session = r.initialize(v)
			case "unknown":
				session = strings.Repeat("ab", 16)
			}
			req := r.request(context.Background(), tc.method, session, tc.body, tc.headers...)
			if tc.path != "" {
				req.URL.Path = tc.path
			}
			resp, err := r.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tc.want.status {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.want.status, body)
			}
			if h := tc.want.header; h[0] != "" && resp.Header.Get(h[0]) != h[1] {
				t.Errorf("%s = %q, want %q", h[0], resp.Header.Get(h[0]), h[1])
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("only a successful initialize carries Mcp-Session-Id; got %q", resp.Header.Get("Mcp-Session-Id"))
			}
			for _, h := range []string{"WWW-Authenticate", "Retry-After"} {
				if resp.Header.Get(h) != "" {
					t.Errorf("unexpected %s: %q", h, resp.Header.Get(h))
				}
			}
			if tc.want.code != 0 {
				checkRefusal(t, resp, body, tc.want.code)
				return
			}
			if !sameBody(body, []byte(tc.want.body)) {
				t.Errorf("body = %q, want %q", body, tc.want.body)
			}
		})
	}
	r.t = t
}

// TestRefusalEchoesTheID checks that a message rejected for its contents
// (not its syntax) is answered with the id it carried.
func TestRefusalEchoesTheID(t *testing.T) {
	r := newRig(t, rigConfig{})
	id := r.initialize("2025-06-18")
	resp, body := r.post(id, `{"jsonrpc":"2.0","id":"abc","method":7}`)
	if resp.StatusCode != 400 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	m := decode(t, body)
	if string(m.ID) != `"abc"` || m.Error == nil || m.Error.Code != jsonrpc2.CodeInvalidRequest {
		t.Fatalf("body %s", body)
	}
}

// sameBody compares JSON bodies as values and other bodies as bytes.
func sameBody(got, want []byte) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
		return string(got) == string(want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

var sessionIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestInitialize checks the session id a successful initialize returns,
// per revision, and the version negotiation.
func TestInitialize(t *testing.T) {
	r := newRig(t, rigConfig{})
	seen := map[string]bool{}
	for _, tc := range []struct{ asked, got string }{
		{"2024-11-05", "2024-11-05"}, {"2025-03-26", "2025-03-26"}, {"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"}, {"1999-01-01", "2025-11-25"}, {"2025-06-18", "2025-06-18"},
	} {
		resp, body := r.post("", initBody(tc.asked))
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %q %s", tc.asked, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		id := resp.Header.Get("Mcp-Session-Id")
		if !sessionIDPattern.MatchString(id) {
			t.Fatalf("session id %q is not 32 lower-case hex digits", id)
		}
		if seen[id] {
			t.Fatalf("session id %s handed out twice", id)
		}
		seen[id] = true
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct{ Name string }
		}
		m := decode(t, body)
		if string(m.ID) != "0" || json.Unmarshal(m.Result, &res) != nil || res.ProtocolVersion != tc.got {
			t.Fatalf("asked %s: answer %s, want protocolVersion %s", tc.asked, body, tc.got)
		}
		if res.ServerInfo.Name != "troupe-test" {
			t.Errorf("serverInfo %s", m.Result)
		}
	}
	if n := r.h.Sessions(); n != len(seen) {
		t.Fatalf("Sessions() = %d, want %d", n, len(seen))
	}
	// A second initialize on a session is a JSON-RPC error, not a new session.
	var any string
	for id := range seen {
		any = id
	}
	resp, body := r.post(any, initBody("2025-06-18"))
	if m := decode(t, body); resp.StatusCode != 200 || m.Error == nil || m.Error.Code != jsonrpc2.CodeInvalidRequest ||
		resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("re-initialize: %d %s", resp.StatusCode, body)
	}
	if n := r.h.Sessions(); n != len(seen) {
		t.Fatalf("Sessions() = %d after re-initialize, want %d", n, len(seen))
	}
}

// TestInitializeAcceptingOnlySSE checks that a client accepting only
// text/event-stream still learns its session id.
func TestInitializeAcceptingOnlySSE(t *testing.T) {
	r := newRig(t, rigConfig{})
	resp := r.do("POST", "", initBody("2025-06-18"), "Accept", acceptSSE)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || len(events) != 1 {
		t.Fatalf("%d %q %v", resp.StatusCode, resp.Header.Get("Content-Type"), events)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if !sessionIDPattern.MatchString(id) {
		t.Fatalf("SSE answer to initialize carries session id %q", id)
	}
	if r.session(id) == nil || r.h.Sessions() != 1 {
		t.Fatalf("session %s not known (%d sessions)", id, r.h.Sessions())
	}
}

// TestFailedInitializeLeavesNoSession checks that initialize requests that
// fail create no session.
func TestFailedInitializeLeavesNoSession(t *testing.T) {
	r := newRig(t, rigConfig{})
	for _, tc := range []struct {
		name, body string
		status     int
		code       int64
	}{
		{"missing protocolVersion", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}`, 200, jsonrpc2.CodeInvalidParams},
		{"protocolVersion not a string", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":7}}`, 200, jsonrpc2.CodeInvalidParams},
		{"capabilities not an object", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":3}}`, 200, jsonrpc2.CodeInvalidParams},
		{"initialize as a notification", `{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, 400, -32000},
		{"initialize with a bad id", `{"jsonrpc":"2.0","id":18446744073709551615,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, 400, jsonrpc2.CodeInvalidRequest},
		{"initialize in a batch", "[" + initBody("2025-03-26") + "]", 400, -32000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := r.post("", tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Fatalf("failed initialize returned session id %q", resp.Header.Get("Mcp-Session-Id"))
			}
			if m := decode(t, body); m.Error == nil || m.Error.Code != tc.code {
				t.Fatalf("body %s, want error %d", body, tc.code)
			}
			waitFor(t, 2*time.Second, "the session to go", func() bool { return r.h.Sessions() == 0 })
		})
	}
}

// TestMaxSessions checks 503 with Retry-After over the limit and while
// shutting down.
func TestMaxSessions(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{MaxSessions: 2}})
	a := r.initialize("2025-06-18")
	r.initialize("2025-06-18")
	resp, body := r.post("", initBody("2025-06-18"))
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "10" {
		t.Fatalf("over the limit: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	checkRefusal(t, resp, body, -32000)
	r.deleteSession(a)
	r.initialize("2025-06-18") // a slot is free again

	r.h.StopAccepting()
	resp, body = r.post("", initBody("2025-06-18"))
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("shutting down: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	checkRefusal(t, resp, body, -32000)
}

// TestDeleteStopsRunningCalls checks that DELETE ends the session, stops
// its running call (the tool's context is cancelled), answers the waiting
// POST, and that the id is unknown afterwards.
func TestDeleteStopsRunningCalls(t *testing.T) {
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	r := newRig(t, rigConfig{tools: []tools.Tool{blockTool(started, cancelled, nil)}})
	id := r.initialize("2025-06-18")
	s := r.session(id)
	type result struct {
		status int
		body   []byte
	}
	answered := make(chan result, 1)
	go func() {
		resp, err := r.client.Do(r.request(context.Background(), "POST", id, callBody(1, "block", "", nil), "Accept", acceptJSON))
		if err != nil {
			answered <- result{status: -1, body: []byte(err.Error())}
			return
		}
		answered <- result{resp.StatusCode, readAll(t, resp)}
	}()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool did not start")
	}
	resp := r.do("DELETE", id, "")
	if body := readAll(t, resp); resp.StatusCode != 204 || len(body) != 0 {
		t.Fatalf("DELETE: %d %q", resp.StatusCode, body)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the running tool's context was not cancelled")
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("DELETE answered before the session ended")
	}
	select {
	case res := <-answered:
		if res.status != 404 {
			t.Fatalf("the waiting POST got %d %s, want 404", res.status, res.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting POST was not answered")
	}
	resp, body := r.post(id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if resp.StatusCode != 404 {
		t.Fatalf("after DELETE: %d %s", resp.StatusCode, body)
	}
	resp = r.do("DELETE", id, "")
	if body := readAll(t, resp); resp.StatusCode != 404 {
		t.Fatalf("second DELETE: %d %s", resp.StatusCode, body)
	}
	if n := r.h.Sessions(); n != 0 {
		t.Fatalf("Sessions() = %d", n)
	}
}

// TestIdleExpiry checks that a session nobody touches ends (its actors
// stop, its id becomes unknown) and that one with a reader on its GET
// stream does not.
func TestIdleExpiry(t *testing.T) {
	const idle = 80 * time.Millisecond
	r := newRig(t, rigConfig{http: actors.HTTPOptions{IdleTimeout: idle}, opts: Options{KeepAlive: 20 * time.Millisecond}})
	quiet := r.initialize("2025-06-18")
	watched := r.initialize("2025-06-18")
	qs, ws := r.session(quiet), r.session(watched)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := r.client.Do(r.request(ctx, "GET", watched, ""))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", err, resp)
	}
	defer resp.Body.Close()

	select {
	case <-qs.Done(): // the httpConn actor has stopped, after its children
	case <-time.After(5 * time.Second):
		t.Fatal("idle session did not expire")
	}
	waitFor(t, 2*time.Second, "the handler to forget the session", func() bool { return r.session(quiet) == nil })
	resp2, body := r.post(quiet, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if resp2.StatusCode != 404 {
		t.Fatalf("expired session: %d %s", resp2.StatusCode, body)
	}
	time.Sleep(3 * idle)
	select {
	case <-ws.Done():
		t.Fatal("a session with an open GET stream expired")
	default:
	}
	cancel()
	resp.Body.Close()
	select {
	case <-ws.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("session did not expire once its stream closed")
	}
	waitFor(t, 2*time.Second, "no sessions", func() bool { return r.h.Sessions() == 0 })
}

// TestBearerAuth checks 401s, the WWW-Authenticate challenge, that
// /healthz needs no token, and that a session is bound to its credential.
func TestBearerAuth(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{BearerToken: "s3cret"}})
	for _, tc := range []struct {
		name, auth, challenge string
	}{
		{"no token", "", `Bearer realm="troupe"`},
		{"another scheme", "Basic czNjcmV0", `Bearer realm="troupe"`},
		{"bearer without a token", "Bearer", `Bearer realm="troupe"`},
		{"wrong token", "Bearer s3cre", `Bearer realm="troupe", error="invalid_token"`},
		{"token with a suffix", "Bearer s3cret2", `Bearer realm="troupe", error="invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, method := range []string{"POST", "GET", "DELETE"} {
				resp, err := r.client.Do(r.request(context.Background(), method, "", initBody("2025-06-18"), "Authorization", tc.auth))
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, resp)
				if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != tc.challenge {
					t.Fatalf("%s: %d WWW-Authenticate %q %s", method, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
				}
				checkRefusal(t, resp, body, -32000)
			}
		})
	}
	if r.h.Sessions() != 0 {
		t.Fatal("an unauthenticated request made a session")
	}

	// /healthz is open.
	resp, err := r.client.Get(r.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}

	r.token = "s3cret"
	id := r.initialize("2025-06-18")
	resp, body := r.post(id, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization", "bearer s3cret") // scheme is case-insensitive
	if resp.StatusCode != 200 {
		t.Fatalf("right token: %d %s", resp.StatusCode, body)
	}

	// A second front with another token, sharing the session table: the
	// session made with the first token is not usable with the second.
	other := New(r.host, Options{Auth: namedTokens("other", "0ther")})
	other.sessions[id] = r.session(id)
	for _, method := range []string{"POST", "GET", "DELETE"} {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(method, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer 0ther")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", acceptBoth)
		req.Header.Set("Mcp-Session-Id", id)
		other.ServeHTTP(w, req)
		if w.Code != 404 {
			t.Fatalf("%s with another credential: %d %s", method, w.Code, w.Body)
		}
	}
	delete(other.sessions, id)
	// Still fine with its own.
	resp, body = r.post(id, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("after the other front: %d %s", resp.StatusCode, body)
	}

	// A rotated token of the same name is the same caller: the session
	// goes on with it, and the old token is refused.
	r.h.SetBearerToken("r0tated")
	resp, _ = r.post(id, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if resp.StatusCode != 401 {
		t.Fatalf("the old token after a rotation: %d", resp.StatusCode)
	}
	r.token = "r0tated"
	if resp, body = r.post(id, `{"jsonrpc":"2.0","id":5,"method":"ping"}`); resp.StatusCode != 200 {
		t.Fatalf("the rotated token of the same name: %d %s", resp.StatusCode, body)
	}
	r.deleteSession(id)
}

// TestOriginAllowList checks that a configured allow-list replaces the
// loopback default.
func TestOriginAllowList(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{AllowedOrigins: []string{"https://app.example"}}})
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"https://app.example", 200},
		{"HTTPS://APP.EXAMPLE", 200},
		{"", 200},
		{"http://app.example", 403},
		{"https://app.example:8443", 403},
		{"http://localhost:3000", 403},
	} {
		resp, body := r.post("", initBody("2025-06-18"), "Origin", tc.origin)
		if resp.StatusCode != tc.status {
			t.Fatalf("Origin %q: %d %s, want %d", tc.origin, resp.StatusCode, body, tc.status)
		}
		if tc.status == 403 {
			checkRefusal(t, resp, body, -32000)
		}
	}
}

// TestHostCheckOff checks that any Host is served when the check is off.
func TestHostCheckOff(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{CheckHost: false}})
	resp, body := r.post("", initBody("2025-06-18"), "Host", "mcp.example.com")
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// TestBatch checks JSON-RPC batches under 2025-03-26: every request is
// answered in one JSON array, notifications are not, invalid members get
// errors of their own.
func TestBatch(t *testing.T) {
	r := newRig(t, rigConfig{})
	id := r.initialize("2025-03-26")
	resp, body := r.post(id, `[
		{"jsonrpc":"2.0","id":1,"method":"ping"},
		`+callBody("two", "echo", `{"x":1}`, nil)+`,
		{"jsonrpc":"2.0","method":"notifications/whatever"},
		{"jsonrpc":"2.0","id":3,"method":"no/such/method"},
		{"jsonrpc":"1.0","id":4,"method":"ping"},
		7
	]`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var replies []rpcMessage
	if err := json.Unmarshal(body, &replies); err != nil {
		t.Fatalf("not a JSON array: %s", body)
	}
	byID := map[string]rpcMessage{}
	nullIDs := 0
	for _, m := range replies {
		if string(m.ID) == "null" {
			nullIDs++
			continue
		}
		byID[string(m.ID)] = m
	}
	if len(replies) != 5 || nullIDs != 1 {
		t.Fatalf("want 5 replies (one with id null), got %s", body)
	}
	if string(byID["1"].Result) != "{}" {
		t.Errorf("ping: %s", body)
	}
	if txt := toolText(t, byID[`"two"`]); txt != `echo {"x":1}` {
		t.Errorf("echo: %q", txt)
	}
	if m := byID["3"]; m.Error == nil || m.Error.Code != jsonrpc2.CodeMethodNotFound {
		t.Errorf("unknown method: %s", body)
	}
	if m := byID["4"]; m.Error == nil || m.Error.Code != jsonrpc2.CodeInvalidRequest {
		t.Errorf("invalid member: %s", body)
	}

	// Notifications and responses only: 202, no body.
	resp, body = r.post(id, `[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"s1","result":{}}]`)
	if resp.StatusCode != 202 || len(body) != 0 {
		t.Fatalf("notification batch: %d %q", resp.StatusCode, body)
	}
	// Truncated batch: a parse error.
	resp, body = r.post(id, `[{"jsonrpc":"2.0","id":1,"method":"ping"},`)
	checkRefusal(t, resp, body, jsonrpc2.CodeParseError)
	if resp.StatusCode != 400 {
		t.Fatalf("truncated batch: %d", resp.StatusCode)
	}
}

// TestSSEAnswer checks that a call whose tool reports progress is answered
// with an event stream (progress and log first, then the response, each
// event with a <stream>-<seq> id) when the client accepts SSE, and with a
// single JSON response when it accepts only JSON.
func TestSSEAnswer(t *testing.T) {
	r := newRig(t, rigConfig{tools: []tools.Tool{progressTool(), echoTool()}})
	id := r.initialize("2025-06-18")

	resp := r.do("POST", id, callBody(7, "progress", "", "tok"))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	var methods []string
	stream := ""
	for i, e := range events {
		s, seq := eventSeq(t, e.ID)
		if stream == "" {
			stream = s
		}
		if s != stream || seq != i+1 || e.Event != "message" {
			t.Fatalf("event %d: id %q event %q, want %s-%d message", i, e.ID, e.Event, stream, i+1)
		}
		m := decode(t, []byte(e.Data))
		if m.Method != "" {
			methods = append(methods, m.Method)
			continue
		}
		methods = append(methods, "response")
		if string(m.ID) != "7" || toolText(t, m) != "progressed" {
			t.Fatalf("response %s", e.Data)
		}
	}
	want := "notifications/progress notifications/message notifications/progress response"
	if got := strings.Join(methods, " "); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	var p struct {
		ProgressToken string  `json:"progressToken"`
		Progress      float64 `json:"progress"`
		Total         float64 `json:"total"`
		Message       string  `json:"message"`
	}
	if err := json.Unmarshal([]byte(decode(t, []byte(events[0].Data)).Params), &p); err != nil ||
		p.ProgressToken != "tok" || p.Progress != 1 || p.Total != 2 || p.Message != "half" {
		t.Fatalf("progress %s", events[0].Data)
	}

	// The same call, accepting only JSON: one application/json response.
	resp, body := r.post(id, callBody(8, "progress", "", "tok2"), "Accept", acceptJSON)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if m := decode(t, body); string(m.ID) != "8" || toolText(t, m) != "progressed" {
		t.Fatalf("JSON answer %s", body)
	}

	// A call without progress is answered with JSON even when SSE is
	// acceptable, and with SSE when only SSE is.
	resp, body = r.post(id, callBody(9, "echo", "", nil))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp = r.do("POST", id, callBody(10, "echo", "", nil), "Accept", acceptSSE)
	events = readEvents(t, resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || len(events) != 1 || string(decode(t, []byte(events[0].Data)).ID) != "10" {
		t.Fatalf("SSE-only: %q %v", resp.Header.Get("Content-Type"), events)
	}
}

// TestStandaloneStream checks the GET stream: 200 text/event-stream,
// keep-alive comments, messages unrelated to a POST stream, 409 for a
// second reader, and its end when the session is deleted.
func TestStandaloneStream(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{KeepAlive: 20 * time.Millisecond}, tools: []tools.Tool{progressTool()}})
	id := r.initialize("2025-06-18")
	resp := r.do("GET", id, "")
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("GET: %d %v", resp.StatusCode, resp.Header)
	}
	type read struct {
		e   sseEvent
		ok  bool
		err error
	}
	rd := newSSEReader(resp.Body)
	reads := make(chan read)
	go func() {
		for {
			e, ok, err := rd.next()
			reads <- read{e, ok, err}
			if !ok || err != nil {
				close(reads)
				return
			}
		}
	}()

	// A second reader is refused.
	resp2 := r.do("GET", id, "")
	body := readAll(t, resp2)
	if resp2.StatusCode != 409 {
		t.Fatalf("second GET: %d %s", resp2.StatusCode, body)
	}
	checkRefusal(t, resp2, body, -32000)

	// A call answered with JSON: its progress is not related to an SSE
	// POST stream, so it travels on the GET stream.
	resp3, body := r.post(id, callBody(1, "progress", "", "tok"), "Accept", acceptJSON)
	if resp3.StatusCode != 200 || toolText(t, decode(t, body)) != "progressed" {
		t.Fatalf("call: %d %s", resp3.StatusCode, body)
	}
	var methods []string
	for len(methods) < 3 {
		select {
		case rr := <-reads:
			if rr.err != nil || !rr.ok {
				t.Fatalf("GET stream ended: %v", rr.err)
			}
			if s, _ := eventSeq(t, rr.e.ID); !strings.HasPrefix(s, "g") {
				t.Errorf("GET stream event id %q", rr.e.ID)
			}
			methods = append(methods, decode(t, []byte(rr.e.Data)).Method)
		case <-time.After(5 * time.Second):
			t.Fatalf("GET stream got %v only", methods)
		}
	}
	if got := strings.Join(methods, " "); got != "notifications/progress notifications/message notifications/progress" {
		t.Fatalf("GET stream carried %q", got)
	}

	// Keep-alive comments arrive while nothing else does.
	time.Sleep(100 * time.Millisecond)

	// DELETE ends the stream.
	r.deleteSession(id)
	select {
	case rr, open := <-reads:
		if open && (rr.ok || rr.err != nil) {
			t.Fatalf("after DELETE the GET stream gave %+v", rr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GET stream still open after DELETE")
	}
	if rd.comments < 2 {
		t.Fatalf("%d keep-alive comments in 100 ms at a 20 ms interval", rd.comments)
	}
}

// TestResume checks Last-Event-ID: a client that dropped an SSE POST
// answer after its first event gets the rest, response included, by GET.
func TestResume(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	r := newRig(t, rigConfig{tools: []tools.Tool{blockTool(started, nil, release)}})
	id := r.initialize("2025-06-18")

	resp := r.do("POST", id, callBody(1, "block", "", "tok"))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	first, ok, err := newSSEReader(resp.Body).next()
	if !ok || err != nil {
		t.Fatalf("first event: %v", err)
	}
	if m := decode(t, []byte(first.Data)); m.Method != "notifications/progress" {
		t.Fatalf("first event %s", first.Data)
	}
	stream, seq := eventSeq(t, first.ID)
	resp.Body.Close() // drops the connection: not a cancellation
	<-started
	waitFor(t, 5*time.Second, "the POST handler to return", func() bool { return r.active.Load() == 0 })
	close(release)

	resp = r.do("GET", id, "", "Last-Event-ID", first.ID)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		body := readAll(t, resp)
		t.Fatalf("resume: %d %s", resp.StatusCode, body)
	}
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if len(events) != 2 {
		t.Fatalf("resumed %d events, want 2: %v", len(events), events)
	}
	for i, e := range events {
		s, n := eventSeq(t, e.ID)
		if s != stream || n != seq+1+i {
			t.Fatalf("resumed event id %q, want %s-%d", e.ID, stream, seq+1+i)
		}
	}
	if m := decode(t, []byte(events[0].Data)); m.Method != "notifications/progress" {
		t.Fatalf("resumed %s", events[0].Data)
	}
	if m := decode(t, []byte(events[1].Data)); string(m.ID) != "1" || toolText(t, m) != "released" {
		t.Fatalf("resumed %s", events[1].Data)
	}

	// Delivered: the stream is forgotten, so resuming again fails.
	waitFor(t, 5*time.Second, "the GET handler to return", func() bool { return r.active.Load() == 0 })
	resp = r.do("GET", id, "", "Last-Event-ID", first.ID)
	body := readAll(t, resp)
	if resp.StatusCode != 400 {
		t.Fatalf("resume of a delivered stream: %d %s", resp.StatusCode, body)
	}
	checkRefusal(t, resp, body, -32000)
}

// TestRequestRacingSessionEnd covers a POST that found its session just
// before the session ended: its request reaches no actor, so no event will
// ever come. It must be answered (404) rather than wait forever.
func TestRequestRacingSessionEnd(t *testing.T) {
	r := newRig(t, rigConfig{})
	for _, batch := range []bool{false, true} {
		id := r.initialize("2025-03-26")
		s := r.session(id)
		s.Close()
		<-s.Done()
		st := s.Request(transport.NewRequest(&jsonrpc2.Request{Method: "ping", ID: jsonrpc2.ID{Num: 1}}), true, true)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req := httptest.NewRequest("POST", "/mcp", nil).WithContext(ctx)
		w := httptest.NewRecorder()
		begin := time.Now()
		if batch {
			r.h.answerBatch(w, req, s, []*httptransport.Stream{st}, nil)
		} else {
			r.h.answer(w, req, s, st, true, true, false)
		}
		cancel()
		if d := time.Since(begin); d > 5*time.Second {
			t.Fatalf("batch=%v: waited %v for a session that had ended", batch, d)
		}
		if w.Code != 404 {
			t.Fatalf("batch=%v: %d %s", batch, w.Code, w.Body)
		}
	}
}

// TestCancelledCall checks notifications/cancelled: the tool's context is
// cancelled, a POST waiting for a JSON answer gets 204 without a body, and
// an SSE answer ends without a response.
func TestCancelledCall(t *testing.T) {
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	r := newRig(t, rigConfig{tools: []tools.Tool{blockTool(started, cancelled, nil)}})
	id := r.initialize("2025-06-18")
	cancel := func(reqID string) {
		t.Helper()
		resp, body := r.post(id, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+reqID+`,"reason":"test"}}`)
		if resp.StatusCode != 202 || len(body) != 0 {
			t.Fatalf("cancel: %d %q", resp.StatusCode, body)
		}
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("the tool was not cancelled")
		}
	}

	type result struct {
		status int
		body   []byte
	}
	answered := make(chan result, 1)
	go func() {
		resp, err := r.client.Do(r.request(context.Background(), "POST", id, callBody(1, "block", "", nil), "Accept", acceptJSON))
		if err != nil {
			answered <- result{-1, []byte(err.Error())}
			return
		}
		answered <- result{resp.StatusCode, readAll(t, resp)}
	}()
	<-started
	cancel("1")
	select {
	case res := <-answered:
		if res.status != 204 || len(res.body) != 0 {
			t.Fatalf("cancelled JSON call: %d %q", res.status, res.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call's POST was not answered")
	}

	resp := r.do("POST", id, callBody("s", "block", "", "tok"))
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	<-started
	cancel(`"s"`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if len(events) != 1 || decode(t, []byte(events[0].Data)).Method != "notifications/progress" {
		t.Fatalf("cancelled SSE call: %v", events)
	}
	// The session goes on.
	resp2, body := r.post(id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if resp2.StatusCode != 200 {
		t.Fatalf("ping after cancel: %d %s", resp2.StatusCode, body)
	}
}
