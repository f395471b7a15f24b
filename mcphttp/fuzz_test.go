package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"troupe/tools"
)

// documentedStatus lists every status the handler may answer with.
var documentedStatus = map[int]bool{
	200: true, 202: true, 204: true, // answered, accepted, cancelled/deleted
	400: true, 403: true, 404: true, 405: true, 406: true, 409: true, 410: true, 413: true, 415: true,
	503: true,
}

// fuzzRig is one Host and Handler shared by every fuzz iteration, served
// in-process (ServeHTTP with a recorder) so an iteration takes
// microseconds; two standing sessions let inputs reach session state.
type fuzzRig struct {
	h        *Handler
	sessions [2]string // under 2025-03-26 (batches allowed) and 2025-11-25
}

var fuzzVersions = [2]string{"2025-03-26", "2025-11-25"}

func (z *fuzzRig) serve(method, sessionID string, body []byte, headers map[string]string, wait time.Duration) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/mcp", bytes.NewReader(body))
	req.Host = "127.0.0.1:8080"
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	w := httptest.NewRecorder()
	z.h.ServeHTTP(w, req.WithContext(ctx))
	return w
}

// initialize makes a session and returns its id, or "" with the recorder
// when initialize did not succeed.
func (z *fuzzRig) initialize(version string) (string, *httptest.ResponseRecorder) {
	w := z.serve("POST", "", []byte(initBody(version)),
		map[string]string{"Content-Type": "application/json", "Accept": acceptBoth}, 5*time.Second)
	id := w.Header().Get("Mcp-Session-Id")
	if w.Code != 200 || id == "" {
		return "", w
	}
	w2 := z.serve("POST", id, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
		map[string]string{"Content-Type": "application/json", "Accept": acceptBoth}, 5*time.Second)
	if w2.Code != 202 {
		return "", w2
	}
	return id, w
}

// session returns standing session i, making it again if an input ended it.
func (z *fuzzRig) session(t *testing.T, i int) string {
	z.h.mu.Lock()
	_, ok := z.h.sessions[z.sessions[i]]
	z.h.mu.Unlock()
	if !ok {
		id, w := z.initialize(fuzzVersions[i])
		if id == "" {
			t.Fatalf("cannot make a session: %d %s", w.Code, w.Body)
		}
		z.sessions[i] = id
	}
	return z.sessions[i]
}

// end closes a session an input made and waits until it is gone.
func (z *fuzzRig) end(t *testing.T, id string) {
	z.h.mu.Lock()
	s := z.h.sessions[id]
	z.h.mu.Unlock()
	if s == nil {
		return
	}
	s.Close()
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("session %s did not end", id)
	}
}

// FuzzHandler sends arbitrary bodies and headers to a live handler and
// checks that it never panics, answers only with documented statuses,
// writes only valid JSON as application/json and as SSE event data, and
// still serves a good initialize afterwards.
func FuzzHandler(f *testing.F) {
	host := newHost(f, rigConfig{tools: []tools.Tool{echoTool(), progressTool()}})
	f.Cleanup(func() { host.Close(5 * time.Second) })
	z := &fuzzRig{h: New(host, Options{CheckHost: true, MaxBodyBytes: 64 << 10, MaxSessions: 32,
		KeepAlive: 2 * time.Millisecond, WriteTimeout: time.Second})}

	const ct, both = "application/json", acceptBoth
	call := callBody(1, "progress", `{"a":[1,2]}`, "tok")
	// method: 0 POST, 1 GET, 2 DELETE, 3 PUT. session: 0 none, 1 the
	// 2025-03-26 session, 2 the 2025-11-25 session, 3 the fuzzed id.
	seeds := []struct {
		method, session                                     uint8
		body, ctype, accept, id, version, origin, lastEvent string
	}{
		{0, 0, initBody("2025-06-18"), ct, both, "", "", "", ""},
		{0, 0, initBody("2025-03-26"), ct, acceptSSE, "", "", "", ""},
		{0, 0, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, ct, both, "", "", "", ""},
		{0, 0, `{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ct, both, "", "2025-03-26", "", ""},
		{0, 1, call, ct, both, "", "", "", ""},
		{0, 2, call, ct, acceptJSON, "", "2025-11-25", "", ""},
		{0, 2, call, ct, acceptSSE, "", "", "http://localhost:1", ""},
		{0, 1, `[` + call + `,{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"}]`, ct, both, "", "", "", ""},
		{0, 1, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, ct, both, "", "", "", ""},
		{0, 1, `[1,null,"x",[],{}]`, ct, both, "", "", "", ""},
		{0, 1, `[]`, ct, both, "", "", "", ""},
		{0, 2, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,`, ct, both, "", "", "", ""},
		{0, 1, `[{"jsonrpc":"2.0","id":1,"method":"ping"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":-1,"method":"ping"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":1e999}}}`, ct, both, "", "", "", ""},
		{0, 1, "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}", ct, both, "", "", "", ""},
		{0, 1, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc3\x28\"}]", ct, both, "", "", "", ""},
		{0, 1, "", ct, both, "", "", "", ""},
		{0, 1, "   \n", ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":"r","result":{}}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"error":"no"}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"method":"ping","params":7}`, ct, both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "text/plain", both, "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ct, "text/html", "", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ct, both, "", "1999-01-01", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ct, both, "", "", "https://evil.example", ""},
		{0, 3, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ct, both, "0123456789abcdef0123456789abcdef", "", "", ""},
		{0, 3, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ct, both, "\x00\n", "", "", ""},
		{0, 1, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`, ct, both, "", "", "", ""},
		{1, 1, "", "", acceptSSE, "", "", "", ""},
		{1, 1, "", "", acceptSSE, "", "", "", "p1-1"},
		{1, 2, "", "", acceptSSE, "", "", "", "g1-0"},
		{1, 1, "", "", acceptSSE, "", "", "", "p18446744073709551616-1"},
		{1, 1, "", "", acceptSSE, "", "", "", "-"},
		{1, 1, "", "", "", "", "", "", ""},
		{1, 3, "", "", acceptSSE, "nope", "", "", ""},
		{2, 1, "", "", "", "", "", "", ""},
		{2, 3, "", "", "", "", "", "", ""},
		{3, 1, `{}`, ct, both, "", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.session, []byte(s.body), s.ctype, s.accept, s.id, s.version, s.origin, s.lastEvent)
	}

	f.Fuzz(func(t *testing.T, method, sessionSel uint8, body []byte, ctype, accept, sessionID, version, origin, lastEvent string) {
		m := [...]string{"POST", "GET", "DELETE", "PUT"}[method%4]
		switch sessionSel % 4 {
		case 0:
			sessionID = ""
		case 1, 2:
			sessionID = z.session(t, int(sessionSel%4)-1)
		}
		headers := map[string]string{"Content-Type": ctype, "Accept": accept, "MCP-Protocol-Version": version, "Origin": origin}
		if m == "GET" {
			headers["Last-Event-ID"] = lastEvent
		}
		// Streams that stay open (GET) end with the request's context;
		// everything else must finish on its own, promptly.
		wait := 2 * time.Second
		if m == "GET" {
			wait = 20 * time.Millisecond
		}
		begin := time.Now()
		w := z.serve(m, sessionID, body, headers, wait)
		if m != "GET" && time.Since(begin) > 1500*time.Millisecond {
			t.Fatalf("%s took %v: %d %s", m, time.Since(begin), w.Code, w.Body)
		}
		checkFuzzResponse(t, w)
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			if w.Code != 200 || sessionID != "" {
				t.Fatalf("Mcp-Session-Id on a %d answer to a request with session %q", w.Code, sessionID)
			}
			z.end(t, id)
		}

		// No session is left behind but the standing ones (a failed
		// initialize closes its session asynchronously; allow for that).
		for end := time.Now().Add(2 * time.Second); z.h.Sessions() > len(z.sessions); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%d sessions after the input; only the %d standing ones should be left", z.h.Sessions(), len(z.sessions))
			}
		}

		// The server still works.
		id, w := z.initialize("2025-06-18")
		if id == "" {
			t.Fatalf("a good initialize failed afterwards: %d %s", w.Code, w.Body)
		}
		z.end(t, id)
	})
}

func checkFuzzResponse(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if !documentedStatus[w.Code] {
		t.Fatalf("undocumented status %d: %s", w.Code, w.Body)
	}
	body := w.Body.Bytes()
	switch ct := w.Header().Get("Content-Type"); ct {
	case "application/json":
		if len(body) > 0 && !json.Valid(body) {
			t.Fatalf("invalid JSON body: %q", body)
		}
	case "text/event-stream":
		if w.Code != 200 {
			t.Fatalf("event stream with status %d", w.Code)
		}
		rd := newSSEReader(bytes.NewReader(body))
		for {
			e, ok, err := rd.next()
			if err != nil {
				t.Fatalf("malformed event stream: %v: %q", err, body)
			}
			if !ok {
				break
			}
			if !json.Valid([]byte(e.Data)) {
				t.Fatalf("event %s carries invalid JSON %q", e.ID, e.Data)
			}
		}
	case "":
		if len(body) > 0 {
			t.Fatalf("status %d: a body without a Content-Type: %q", w.Code, body)
		}
	default:
		t.Fatalf("unexpected Content-Type %q", ct)
	}
}
