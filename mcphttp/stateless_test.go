package mcphttp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"troupe/tools"
)

// modernMeta is the _meta every 2026-07-28 request carries; extra is
// added inside it (`,"io.modelcontextprotocol/logLevel":"debug"`).
func modernMeta(version, extra string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version +
		`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}` + extra + `}`
}

func modernBody(id int, method, params string) string {
	if params == "" {
		params = modernMeta("2026-07-28", "")
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, id, method, params)
}

// modernHeaders are the headers a conforming client sends with body.
func modernHeaders(method, name string) []string {
	h := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

func TestModernRequestsWithoutSession(t *testing.T) {
	r := newRig(t, rigConfig{tools: []tools.Tool{echoTool(), progressTool()}})

	// server/discover: versions, capabilities, server info, cache fields.
	resp, body := r.post("", modernBody(1, "server/discover", ""), modernHeaders("server/discover", "")...)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("discover: %d session=%q %s", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), body)
	}
	var disc struct {
		ResultType        string                     `json:"resultType"`
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		TTL               *int64                     `json:"ttlMs"`
		Scope             string                     `json:"cacheScope"`
		Meta              map[string]struct {
			Name string `json:"name"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(decode(t, body).Result, &disc); err != nil {
		t.Fatal(err)
	}
	if disc.ResultType != "complete" || len(disc.SupportedVersions) == 0 || disc.SupportedVersions[0] != "2026-07-28" ||
		disc.Capabilities["tools"] == nil || disc.TTL == nil || disc.Scope != "public" ||
		disc.Meta["io.modelcontextprotocol/serverInfo"].Name != "troupe-test" {
		t.Fatalf("discover result: %s", body)
	}

	// tools/list: sorted, complete, cacheable.
	resp, body = r.post("", modernBody(2, "tools/list", ""), modernHeaders("tools/list", "")...)
	var list struct {
		ResultType string `json:"resultType"`
		Tools      []struct {
			Name string `json:"name"`
		} `json:"tools"`
		TTL   *int64 `json:"ttlMs"`
		Scope string `json:"cacheScope"`
	}
	if err := json.Unmarshal(decode(t, body).Result, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("tools/list: %d %s", resp.StatusCode, body)
	}
	if list.ResultType != "complete" || len(list.Tools) != 2 || list.Tools[0].Name != "echo" ||
		list.Tools[1].Name != "progress" || list.TTL == nil || list.Scope == "" {
		t.Fatalf("tools/list result: %s", body)
	}

	// tools/call as JSON.
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},%s}}`,
		modernMeta("2026-07-28", ""))
	resp, body = r.post("", call, modernHeaders("tools/call", "echo")...)
	if m := decode(t, body); resp.StatusCode != 200 || toolText(t, m) != `echo {"a":1}` ||
		!strings.Contains(string(m.Result), `"resultType":"complete"`) {
		t.Fatalf("tools/call: %d %s", resp.StatusCode, body)
	}
	// Mcp-Name in the base64 sentinel form is decoded before comparing.
	resp, body = r.post("", call, modernHeaders("tools/call", "=?base64?"+base64.StdEncoding.EncodeToString([]byte("echo"))+"?=")...)
	if resp.StatusCode != 200 || decode(t, body).Error != nil {
		t.Fatalf("tools/call with an encoded Mcp-Name: %d %s", resp.StatusCode, body)
	}
	waitFor(t, 5*time.Second, "the requests' sessions to end", r.h.idle)

	// A legacy session works on the same endpoint afterwards.
	id := r.initialize("2025-11-25")
	_, body = r.post(id, callBody(4, "echo", `{"b":2}`, nil))
	if got := toolText(t, decode(t, body)); got != `echo {"b":2}` || strings.Contains(string(body), "resultType") {
		t.Fatalf("legacy call after modern ones: %s", body)
	}
}

func TestModernLogLevelIsPerRequest(t *testing.T) {
	r := newRig(t, rigConfig{tools: []tools.Tool{progressTool()}})
	for _, tc := range []struct {
		extra   string
		wantLog bool
	}{
		{`,"io.modelcontextprotocol/logLevel":"debug"`, true},
		{"", false}, // no logLevel: no notifications/message at all
	} {
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{},%s}}`,
			modernMeta("2026-07-28", tc.extra))
		resp := r.do(http.MethodPost, "", call, append(modernHeaders("tools/call", "progress"), "Accept", acceptBoth)...)
		var logs, finals int
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			for _, e := range readEvents(t, resp.Body) {
				m := decode(t, []byte(e.Data))
				if m.Method == "notifications/message" {
					logs++
				}
				if m.Result != nil {
					finals++
				}
			}
		} else {
			body := readAll(t, resp)
			if decode(t, body).Result != nil {
				finals++
			}
		}
		if finals != 1 || (logs > 0) != tc.wantLog {
			t.Errorf("logLevel %q: %d log messages, %d results", tc.extra, logs, finals)
		}
	}
}

func TestModernRequestErrors(t *testing.T) {
	r := newRig(t, rigConfig{})
	meta := modernMeta("2026-07-28", "")
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":{},` + meta + `}}`
	}
	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		status  int
		code    int64
		mention string
	}{
		{"unsupported version", modernBody(7, "tools/list", modernMeta("1900-01-01", "")),
			[]string{"MCP-Protocol-Version", "1900-01-01", "Mcp-Method", "tools/list"}, 400, -32022, "supported"},
		{"handshake version per request", modernBody(7, "tools/list", modernMeta("2025-11-25", "")),
			[]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}, 400, -32022, "initialize"},
		{"no capabilities", modernBody(7, "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`),
			modernHeaders("tools/list", ""), 400, -32602, "clientCapabilities"},
		{"bad log level", modernBody(7, "tools/list", modernMeta("2026-07-28", `,"io.modelcontextprotocol/logLevel":"loud"`)),
			modernHeaders("tools/list", ""), 400, -32602, "logLevel"},
		{"discover without _meta", `{"jsonrpc":"2.0","id":7,"method":"server/discover"}`,
			modernHeaders("server/discover", ""), 400, -32602, "protocolVersion"},
		{"version header missing", modernBody(7, "tools/list", ""),
			[]string{"MCP-Protocol-Version", "", "Mcp-Method", "tools/list"}, 400, -32020, "MCP-Protocol-Version"},
		{"version header differs", modernBody(7, "tools/list", ""),
			[]string{"MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/list"}, 400, -32020, "MCP-Protocol-Version"},
		{"method header missing", modernBody(7, "tools/list", ""),
			[]string{"MCP-Protocol-Version", "2026-07-28"}, 400, -32020, "Mcp-Method"},
		{"method header differs", modernBody(7, "tools/list", ""),
			modernHeaders("server/discover", ""), 400, -32020, "Mcp-Method"},
		{"name header missing", call("echo"), modernHeaders("tools/call", ""), 400, -32020, "Mcp-Name"},
		{"name header differs", call("echo"), modernHeaders("tools/call", "other"), 400, -32020, "'other'"},
		{"name header bad base64", call("echo"), modernHeaders("tools/call", "=?base64?***?="), 400, -32020, "malformed"},
		{"unknown method", modernBody(7, "no/such", ""), modernHeaders("no/such", ""), 404, -32601, "no/such"},
		{"ping is old-era only", modernBody(7, "ping", ""), modernHeaders("ping", ""), 404, -32601, "ping"},
		{"setLevel is old-era only", modernBody(7, "logging/setLevel", meta+`,"level":"debug"`),
			modernHeaders("logging/setLevel", ""), 404, -32601, "logging/setLevel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := r.post("", tc.body, tc.headers...)
			m := decode(t, body)
			if resp.StatusCode != tc.status || m.Error == nil || m.Error.Code != tc.code ||
				!strings.Contains(m.Error.Message+string(m.Error.Data), tc.mention) || string(m.ID) != "7" {
				t.Fatalf("got %d %s; want %d, code %d mentioning %q", resp.StatusCode, body, tc.status, tc.code, tc.mention)
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Fatal("a session id was issued")
			}
		})
	}
	// -32022 lists what troupe supports and what was asked.
	_, body := r.post("", modernBody(8, "tools/list", modernMeta("1900-01-01", "")),
		"MCP-Protocol-Version", "1900-01-01", "Mcp-Method", "tools/list")
	var data struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	if err := json.Unmarshal(decode(t, body).Error.Data, &data); err != nil || data.Requested != "1900-01-01" ||
		len(data.Supported) < 2 || data.Supported[0] != "2026-07-28" {
		t.Fatalf("-32022 data: %s", body)
	}
	// Without a session id and without modern _meta, the handshake era's
	// answer stands (a dual-era client reads it as "legacy").
	resp, body := r.post("", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Mcp-Session-Id") {
		t.Fatalf("legacy request without session: %d %s", resp.StatusCode, body)
	}
	if n, _ := r.h.statelessInFlight(); n != 0 || r.h.Sessions() != 0 {
		t.Fatalf("refused requests left %d sessions, %d stateless requests", r.h.Sessions(), n)
	}
}

// A client that closes its response stream cancels its call: the tool's
// context ends and the request's session goes away.
func TestModernClosedStreamCancelsCall(t *testing.T) {
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	r := newRig(t, rigConfig{tools: []tools.Tool{blockTool(started, cancelled, nil)}})
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{},%s}}`,
		modernMeta("2026-07-28", `,"progressToken":"p"`))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := r.request(ctx, http.MethodPost, "", call, modernHeaders("tools/call", "block")...)
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("a call with progress answered %q, want an SSE stream", ct)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the response stream did not cancel the call")
	}
	waitFor(t, 5*time.Second, "the request's session to end", r.h.idle)
}

// subscriptions/listen over HTTP: an SSE stream of its own, acknowledged
// first, tools list changes on it, and closing it ends the subscription
// and its session.
func TestModernSubscriptionsListen(t *testing.T) {
	r := newRig(t, rigConfig{})
	body := modernBody(5, "subscriptions/listen", `"notifications":{"toolsListChanged":true},`+modernMeta("2026-07-28", ""))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := r.client.Do(r.request(ctx, http.MethodPost, "", body, modernHeaders("subscriptions/listen", "")...))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("listen answered %d %v", resp.StatusCode, resp.Header)
	}
	rd := newSSEReader(resp.Body)
	nextData := func() string {
		t.Helper()
		for {
			e, ok, err := rd.next()
			if err != nil || !ok {
				t.Fatalf("stream ended: %v", err)
			}
			if e.Data != "" {
				return e.Data
			}
		}
	}
	if d := nextData(); !strings.Contains(d, `"notifications/subscriptions/acknowledged"`) ||
		!strings.Contains(d, `"io.modelcontextprotocol/subscriptionId":5`) {
		t.Fatalf("first event: %s", d)
	}
	next, err := tools.NewRegistry(echoTool(), progressTool())
	if err != nil {
		t.Fatal(err)
	}
	r.host.SetRegistry(next)
	if d := nextData(); !strings.Contains(d, `"notifications/tools/list_changed"`) ||
		!strings.Contains(d, `"io.modelcontextprotocol/subscriptionId":5`) {
		t.Fatalf("want tools/list_changed on the stream, got %s", d)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, 5*time.Second, "the subscription's session to end", r.h.idle)

	// Without text/event-stream in Accept a subscription cannot be served.
	resp2, b := r.post("", body, append(modernHeaders("subscriptions/listen", ""), "Accept", acceptJSON)...)
	if resp2.StatusCode != http.StatusNotAcceptable {
		t.Fatalf("listen without SSE: %d %s", resp2.StatusCode, b)
	}
}

// FuzzModernPost sends 2026-07-28 shapes (fuzzed body, _meta and the
// Mcp-Method, Mcp-Name and MCP-Protocol-Version headers) without a session:
// no panic, only documented statuses, valid JSON, no session id issued, no
// session left behind, and a good request still answered afterwards.
func FuzzModernPost(f *testing.F) {
	host := newHost(f, rigConfig{tools: []tools.Tool{echoTool(), progressTool()}})
	f.Cleanup(func() { host.Close(5 * time.Second) })
	z := &fuzzRig{h: New(host, Options{CheckHost: true, MaxBodyBytes: 64 << 10, MaxSessions: 32,
		KeepAlive: 2 * time.Millisecond, WriteTimeout: time.Second})}
	meta := modernMeta("2026-07-28", "")
	for _, s := range []struct{ body, version, method, name string }{
		{modernBody(1, "server/discover", ""), "2026-07-28", "server/discover", ""},
		{modernBody(1, "tools/list", ""), "2026-07-28", "tools/list", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta + `}}`, "2026-07-28", "tools/call", "echo"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{},` +
			modernMeta("2026-07-28", `,"io.modelcontextprotocol/logLevel":"debug","progressToken":1`) + `}}`, "2026-07-28", "tools/call", "progress"},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"troupe://output/x",` + meta + `}}`, "2026-07-28", "resources/read", "troupe://output/x"},
		{modernBody(1, "tools/list", modernMeta("1900-01-01", "")), "1900-01-01", "tools/list", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{}}}`, "2026-07-28", "server/discover", ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + meta + `}}`, "2026-07-28", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7,` + meta + `}}`, "2026-07-28", "tools/call", "=?base64?Nw==?="},
		// Multi round-trip retries: a forged state, answers of the wrong
		// types, answers without a state.
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"requestState":"AQIDBA","inputResponses":{"approval":{"action":"accept","content":{"decision":"once"}}},` + meta + `}}`, "2026-07-28", "tools/call", "echo"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"requestState":7,"inputResponses":[],` + meta + `}}`, "2026-07-28", "tools/call", "echo"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"inputResponses":{"x":null},` + meta + `}}`, "2026-07-28", "tools/call", "echo"},
	} {
		f.Add([]byte(s.body), s.version, s.method, s.name)
	}
	f.Fuzz(func(t *testing.T, body []byte, version, method, name string) {
		headers := map[string]string{"Content-Type": "application/json", "Accept": acceptBoth,
			"MCP-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name}
		w := z.serve("POST", "", body, headers, 2*time.Second)
		checkFuzzResponse(t, w)
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			z.end(t, id) // the body was an initialize: the handshake era's
		}
		for end := time.Now().Add(2 * time.Second); !z.h.idle(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				n, subs := z.h.statelessInFlight()
				t.Fatalf("%d sessions, %d requests, %d subscriptions left after a stateless request", z.h.Sessions(), n, subs)
			}
		}
		w = z.serve("POST", "", []byte(modernBody(1, "tools/list", "")),
			map[string]string{"Content-Type": "application/json", "Accept": acceptBoth,
				"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, 5*time.Second)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"resultType":"complete"`) {
			t.Fatalf("a good request failed afterwards: %d %s", w.Code, w.Body)
		}
	})
}

// Sequential 2026-07-28 requests of one caller are served by one pooled
// hidden session: no actor is started per request.
func TestModernRequestsReuseTheirSession(t *testing.T) {
	r := newRig(t, rigConfig{tools: []tools.Tool{echoTool()}})
	for i := range 20 {
		body := `{"jsonrpc":"2.0","id":` + fmt.Sprint(i+1) + `,"method":"tools/call","params":{"name":"echo","arguments":{},` + modernMeta("2026-07-28", "") + `}}`
		resp, b := r.post("", body, modernHeaders("tools/call", "echo")...)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"resultType":"complete"`) {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if n := r.h.pool.len(); n != 1 {
		t.Fatalf("%d pooled sessions after sequential requests, want 1", n)
	}
	if n, _ := r.h.statelessInFlight(); n != 0 {
		t.Fatalf("%d stateless slots held after the answers", n)
	}
}
