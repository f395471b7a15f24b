package mcphttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"troupe/tools"
)

// A 2026-07-28 request that comes with an Mcp-Session-Id is refused with
// 400 and -32600 (it would otherwise be served inside that session, past
// this era's header checks), whether the session exists or not, and no
// session id is echoed; the session itself goes on working.
func TestModernRequestWithSessionIDIsRefused(t *testing.T) {
	r := newRig(t, rigConfig{})
	sid := r.initialize("2025-11-25")
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{},%s}}`,
		modernMeta("2026-07-28", ""))
	for _, tc := range []struct {
		name, session, body string
		headers             []string
	}{
		{"discover in a session", sid, modernBody(7, "server/discover", ""), modernHeaders("server/discover", "")},
		{"discover without modern headers", sid, modernBody(7, "server/discover", ""), nil},
		{"call with modern _meta", sid, call, modernHeaders("tools/call", "echo")},
		{"call with modern _meta, legacy headers", sid, call, []string{"MCP-Protocol-Version", "2025-11-25"}},
		{"unknown session", "0123456789abcdef0123456789abcdef", modernBody(7, "tools/list", ""), modernHeaders("tools/list", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := r.post(tc.session, tc.body, tc.headers...)
			m := decode(t, body)
			if resp.StatusCode != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32600 ||
				!strings.Contains(m.Error.Message, "Mcp-Session-Id") || !strings.Contains(m.Error.Message, "2026-07-28") ||
				string(m.ID) != "7" {
				t.Fatalf("got %d %s; want 400 with -32600 about Mcp-Session-Id", resp.StatusCode, body)
			}
			if got := resp.Header.Get("Mcp-Session-Id"); got != "" {
				t.Fatalf("the refusal names a session: %q", got)
			}
		})
	}
	_, body := r.post(sid, callBody(8, "echo", `{"still":1}`, nil))
	if got := toolText(t, decode(t, body)); got != `echo {"still":1}` {
		t.Fatalf("the session after the refusals: %s", body)
	}
	// A handshake-era request that names its own (handshake) revision in
	// _meta is the session's business, not a stateless request.
	legacyMeta := `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`
	if resp, body := r.post(sid, legacyMeta); resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "-32600") {
		t.Fatalf("a handshake revision in _meta was refused as stateless: %s", body)
	}
}

// checkOverLimit expects the 503 of a bound: Retry-After and a JSON-RPC
// error that names the setting.
func checkOverLimit(t *testing.T, resp *http.Response, body []byte, key string) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over %s: %d Retry-After %q %s", key, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	checkRefusal(t, resp, body, -32000)
	if !strings.Contains(string(body), key) {
		t.Fatalf("the refusal does not name %s: %s", key, body)
	}
}

// openListen opens a subscriptions/listen stream and reads its
// acknowledgement; cancel closes it.
func openListen(t *testing.T, r *rig, id int) (closeStream func()) {
	t.Helper()
	body := modernBody(id, "subscriptions/listen", `"notifications":{"toolsListChanged":true},`+modernMeta("2026-07-28", ""))
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := r.client.Do(r.request(ctx, http.MethodPost, "", body, modernHeaders("subscriptions/listen", "")...))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b := readAll(t, resp)
		cancel()
		t.Fatalf("listen: %d %s", resp.StatusCode, b)
	}
	e, ok, err := newSSEReader(resp.Body).next()
	if !ok || err != nil || !strings.Contains(e.Data, "subscriptions/acknowledged") {
		cancel()
		t.Fatalf("listen's first event: %+v %v", e, err)
	}
	return func() { cancel(); resp.Body.Close() }
}

// http.max_subscriptions bounds open listen streams on their own: a second
// one is refused while the first is open and served once it is closed;
// meanwhile other 2026-07-28 requests are served, and so is a legacy
// initialize with http.max_sessions = 1.
func TestMaxSubscriptions(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{MaxSubscriptions: 1, MaxSessions: 1}})
	closeFirst := openListen(t, r, 1)
	defer closeFirst()

	body := modernBody(2, "subscriptions/listen", `"notifications":{"toolsListChanged":true},`+modernMeta("2026-07-28", ""))
	resp, b := r.post("", body, modernHeaders("subscriptions/listen", "")...)
	checkOverLimit(t, resp, b, "http.max_subscriptions")

	// The open subscription takes no request slot and no session slot.
	resp, b = r.post("", modernBody(3, "tools/list", ""), modernHeaders("tools/list", "")...)
	if resp.StatusCode != http.StatusOK || decode(t, b).Error != nil {
		t.Fatalf("tools/list beside an open subscription: %d %s", resp.StatusCode, b)
	}
	sid := r.initialize("2025-11-25") // MaxSessions is 1
	r.deleteSession(sid)

	closeFirst()
	waitFor(t, 5*time.Second, "the subscription's slot to be free", func() bool {
		_, subs := r.h.statelessInFlight()
		return subs == 0
	})
	closeSecond := openListen(t, r, 4)
	closeSecond()
}

// http.max_stateless_requests bounds 2026-07-28 requests in flight: over
// it they get 503, while a legacy client still initializes and calls; a
// legacy session does not take a stateless slot either, and a slot frees
// when its request is answered.
func TestMaxStatelessRequests(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	r := newRig(t, rigConfig{tools: []tools.Tool{echoTool(), blockTool(started, nil, release)},
		opts: Options{MaxStatelessRequests: 1, MaxSessions: 1}})

	// A legacy session fills max_sessions; stateless requests are still served.
	sid := r.initialize("2025-11-25")
	resp, b := r.post("", modernBody(1, "tools/list", ""), modernHeaders("tools/list", "")...)
	if resp.StatusCode != http.StatusOK || decode(t, b).Error != nil {
		t.Fatalf("tools/list while max_sessions is reached: %d %s", resp.StatusCode, b)
	}
	r.deleteSession(sid)
	waitFor(t, 5*time.Second, "the slots to be free", r.h.idle)

	// A blocked call fills max_stateless_requests.
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{},%s}}`,
		modernMeta("2026-07-28", ""))
	answered := make(chan []byte, 1)
	go func() {
		resp, err := r.client.Do(r.request(context.Background(), http.MethodPost, "", call, modernHeaders("tools/call", "block")...))
		if err != nil {
			answered <- []byte(err.Error())
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			b = []byte(err.Error())
		}
		answered <- b
	}()
	<-started
	resp, b = r.post("", modernBody(3, "server/discover", ""), modernHeaders("server/discover", "")...)
	checkOverLimit(t, resp, b, "http.max_stateless_requests")

	// Legacy clients are not locked out.
	sid = r.initialize("2025-11-25")
	if _, b := r.post(sid, callBody(4, "echo", `{"legacy":1}`, nil)); toolText(t, decode(t, b)) != `echo {"legacy":1}` {
		t.Fatalf("legacy call while stateless requests fill their bound: %s", b)
	}

	close(release)
	if got := <-answered; !strings.Contains(string(got), "released") {
		t.Fatalf("the blocked call: %s", got)
	}
	waitFor(t, 5*time.Second, "the request's slot to be free", func() bool {
		n, _ := r.h.statelessInFlight()
		return n == 0
	})
	resp, b = r.post("", modernBody(5, "server/discover", ""), modernHeaders("server/discover", "")...)
	if resp.StatusCode != http.StatusOK || decode(t, b).Error != nil {
		t.Fatalf("discover once the slot is free: %d %s", resp.StatusCode, b)
	}
}
