package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"troupe/actors"
	"troupe/mcphttp"
	"troupe/protocol"
	"troupe/tools"
)

func TestParseMessage(t *testing.T) {
	for _, c := range []struct {
		in    string
		id    int64
		kind  string
		isReq bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, 7, "", false},
		{`{"id":8,"result":{"content":[{"type":"text","text":"\"isError\":true"}]},"jsonrpc":"2.0"}`, 8, "", false},
		{` { "jsonrpc" : "2.0", "id" : 9 , "result" : {"isError": true} }`, 9, KindIsError, false},
		{`{"jsonrpc":"2.0","id":10,"error":{"code":-32602,"message":"x"}}`, 10, "jsonrpc:-32602", false},
		{`{"jsonrpc":"2.0","id":"11","method":"ping"}`, 11, "", true},
	} {
		m, err := parseMessage([]byte(c.in))
		if err != nil || !m.hasID || m.id != c.id || m.kind != c.kind || (m.method != "") != c.isReq {
			t.Errorf("parseMessage(%s) = %+v, %v", c.in, m, err)
		}
	}
	if _, err := parseMessage([]byte(`{"id":1,"result":{`)); err == nil {
		t.Error("a truncated message parsed")
	}
}

func TestStdioThroughput(t *testing.T) {
	rep, err := Run(context.Background(), Options{Target: echoTarget(t), Calls: 2000, Concurrency: 8, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 2000 || rep.OK != 2000 || len(rep.Errors) != 0 || rep.Aborted != "" {
		t.Fatalf("report: %+v", rep)
	}
	if rep.StartupMs <= 0 || rep.Server == nil || rep.Server.RSSEnd <= 0 || rep.Latency.P50 <= 0 || rep.Latency.Max < rep.Latency.P99 {
		t.Fatalf("missing figures: %+v %+v", rep, rep.Server)
	}
	// The server's process group is gone once Run returns.
	if err := syscall.Kill(-rep.Server.PID, 0); err == nil {
		t.Fatalf("the server's process group %d is still alive", rep.Server.PID)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil || !strings.Contains(out.String(), "calls/s") {
		t.Fatalf("table: %v\n%s", err, out.String())
	}
}

func TestStdioErrorKinds(t *testing.T) {
	for tool, kind := range map[string]string{"fail": KindIsError, "nope": "jsonrpc:-32602"} {
		rep, err := Run(context.Background(), Options{Target: echoTarget(t), Tool: tool, Calls: 50, Concurrency: 4, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Calls != 50 || rep.OK != 0 || rep.Errors[kind] != 50 || len(rep.Errors) != 1 {
			t.Errorf("%s: calls %d ok %d errors %v; want 50 %s", tool, rep.Calls, rep.OK, rep.Errors, kind)
		}
	}
}

func TestStdioTimeoutAndBadCommand(t *testing.T) {
	rep, err := Run(context.Background(), Options{Target: echoTarget(t), Tool: "slow", Calls: 4, Concurrency: 2,
		CallTimeout: 5 * time.Millisecond, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors[KindTimeout] != 4 || rep.Latency.Max != 0 {
		t.Fatalf("errors %v latency %+v", rep.Errors, rep.Latency)
	}
	if _, err := Run(context.Background(), Options{Target: Target{Command: []string{"/nonexistent/server"}}}); err == nil {
		t.Fatal("a missing command started")
	}
	if _, err := Run(context.Background(), Options{Target: Target{Command: []string{"true"}}, CallTimeout: 2 * time.Second}); err == nil {
		t.Fatal("a server that exits at once answered initialize")
	}
}

// troupeHTTP serves troupe itself (actors.Host behind mcphttp.Handler) on
// loopback with an "echo" tool and a "peak" tool that records the most
// calls it saw at once.
func troupeHTTP(t *testing.T, peak *atomic.Int64) string {
	t.Helper()
	return troupeHTTPWrapped(t, peak, func(h http.Handler) http.Handler { return h })
}

// troupeHTTPWrapped is troupeHTTP with wrap around troupe's handler.
func troupeHTTPWrapped(t *testing.T, peak *atomic.Int64, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var inFlight atomic.Int64
	reg, err := tools.NewRegistry(
		funcTool{name: "echo", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
			return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(string(req.Arguments))}}, nil
		}},
		funcTool{name: "peak", call: func(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(3 * time.Millisecond)
			return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("ok")}}, nil
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	host := actors.NewHost(actors.Options{Session: actors.SessionOptions{Registry: reg,
		ServerInfo: protocol.Implementation{Name: "troupe-test", Version: "0"}}, Grace: 2 * time.Second})
	srv := httptest.NewServer(wrap(mcphttp.New(host, mcphttp.Options{})))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		host.Close(5 * time.Second)
	})
	return srv.URL + "/mcp"
}

type funcTool struct {
	name string
	call func(context.Context, *tools.Request) (*protocol.CallToolResult, error)
}

func (f funcTool) Spec() tools.Spec {
	return tools.Spec{Name: f.name, Description: "test tool", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (f funcTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	return f.call(ctx, req)
}

func TestHTTPThroughputAndConcurrency(t *testing.T) {
	var peak atomic.Int64
	url := troupeHTTP(t, &peak)
	rep, err := Run(context.Background(), Options{Target: Target{URL: url}, Calls: 1000, Concurrency: 8, Sessions: 3, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 1000 || rep.OK != 1000 || len(rep.Errors) != 0 || rep.Sessions != 3 || rep.StartupMs != 0 {
		t.Fatalf("report: %+v", rep)
	}
	rep, err = Run(context.Background(), Options{Target: Target{URL: url}, Tool: "peak", Calls: 60, Concurrency: 4, Sessions: 2, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); rep.OK != 60 || p > 4 || p < 2 {
		t.Fatalf("ok %d, peak in flight %d; want 60 calls, at most 4 at once", rep.OK, p)
	}
	// troupe answers an unknown tool with isError (a JSON-RPC error from
	// other servers: see TestStdioErrorKinds).
	rep, err = Run(context.Background(), Options{Target: Target{URL: url}, Tool: "nope", Calls: 10, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors[KindIsError] != 10 {
		t.Fatalf("unknown tool: %v", rep.Errors)
	}
}

func TestHTTPSessionsAndJSON(t *testing.T) {
	url := troupeHTTP(t, new(atomic.Int64))
	// This process is the server: its RSS is the figure.
	rep, err := Run(context.Background(), Options{Target: Target{URL: url}, Mode: ModeSessions, Sessions: 50, PID: syscall.Getpid(), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SessionsOpened != 50 || rep.Server == nil || rep.Server.RSSStart <= 0 || len(rep.Errors) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back["sessions_opened"] != 50.0 || back["mode"] != "sessions" {
		t.Fatalf("JSON report %s: %v", b, err)
	}
	if _, err := Run(context.Background(), Options{Target: Target{URL: url + "x"}, Mode: ModeSessions, Sessions: 2}); err == nil {
		t.Fatal("sessions on a wrong path opened")
	}
}

func TestSoak(t *testing.T) {
	rep, err := Run(context.Background(), Options{Target: echoTarget(t), Mode: ModeSoak, Rate: 400, Duration: 600 * time.Millisecond,
		Interval: 200 * time.Millisecond, Concurrency: 4, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls+rep.Behind != 240 || rep.Calls < 200 || len(rep.Errors) != 0 {
		t.Fatalf("calls %d behind %d errors %v", rep.Calls, rep.Behind, rep.Errors)
	}
	if n := len(rep.Intervals); n < 3 || n > 4 || rep.Intervals[0].Calls == 0 || rep.Intervals[0].RSS <= 0 {
		t.Fatalf("intervals: %+v", rep.Intervals)
	}
	var sum int64
	for _, iv := range rep.Intervals {
		sum += iv.Calls
	}
	if sum != rep.Calls {
		t.Fatalf("intervals hold %d calls of %d", sum, rep.Calls)
	}
}

func TestOptionErrors(t *testing.T) {
	for _, o := range []Options{
		{},
		{Target: Target{URL: "localhost:1"}},
		{Target: Target{URL: "http://x", Command: []string{"x"}}},
		{Target: Target{Command: []string{"x"}}, Mode: ModeSessions},
		{Target: Target{Command: []string{"x"}}, Mode: ModeSoak},
		{Target: Target{Command: []string{"x"}}, Mode: "fast"},
		{Target: Target{Command: []string{"x"}}, Args: json.RawMessage(`[1]`)},
		{Target: Target{Command: []string{"x"}}, Stateless: true},
		{Target: Target{URL: "http://x"}, Stateless: true, Mode: ModeSessions},
		{Target: Target{URL: "http://x"}, Stateless: true, Sessions: 2},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) accepted", o)
		}
	}
}

// TestHTTPStateless drives troupe's 2026-07-28 path: server/discover
// once, then tools/calls without a session. troupe refuses a call whose
// _meta or headers are wrong (400, -32602 or -32020), and a call that
// carries a session id, so every call answered proves the requests
// conform.
func TestHTTPStateless(t *testing.T) {
	url := troupeHTTP(t, new(atomic.Int64))
	rep, err := Run(context.Background(), Options{Target: Target{URL: url}, Stateless: true, Calls: 500, Concurrency: 8,
		Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 500 || rep.OK != 500 || len(rep.Errors) != 0 || rep.Sessions != 0 || rep.Stateless != "2026-07-28" {
		t.Fatalf("report: %+v %v", rep, rep.ErrorTexts)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil || !strings.Contains(out.String(), "without a session (2026-07-28)") {
		t.Fatalf("table: %v\n%s", err, out.String())
	}
	// A tool name that is not plain ASCII goes into Mcp-Name base64
	// encoded; troupe compares the decoded header with params.name, so a
	// wrong encoding would be a -32020, not the isError of an unknown tool.
	rep, err = Run(context.Background(), Options{Target: Target{URL: url}, Stateless: true, Tool: "écho ", Calls: 5,
		Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors[KindIsError] != 5 {
		t.Fatalf("unknown tool: %v %v", rep.Errors, rep.ErrorTexts)
	}
}

// TestHTTPStatelessOlderServer: a server that does not know server/discover
// (-32601, or an HTTP 4xx) gets the 2025 revisions' stateless calls: a
// tools/call with no session id, no initialize and no _meta.
func TestHTTPStatelessOlderServer(t *testing.T) {
	for _, refusal := range []string{"jsonrpc", "http"} {
		var calls, bad atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, "bad JSON", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			switch {
			case req.Method == "server/discover" && refusal == "http":
				http.Error(w, "Bad Request: Mcp-Session-Id required", http.StatusBadRequest)
			case req.Method == "server/discover":
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID)
			case req.Method == "tools/call":
				calls.Add(1)
				if r.Header.Get("Mcp-Session-Id") != "" || bytes.Contains(req.Params, []byte("_meta")) ||
					r.Header.Get("Mcp-Method") != "" || r.Header.Get("Mcp-Protocol-Version") != "2025-06-18" {
					bad.Add(1)
				}
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
			default:
				bad.Add(1)
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID)
			}
		}))
		rep, err := Run(context.Background(), Options{Target: Target{URL: srv.URL}, Stateless: true, Calls: 20, Concurrency: 2,
			Timeout: 20 * time.Second})
		srv.Close()
		if err != nil {
			t.Fatalf("%s: %v", refusal, err)
		}
		if rep.OK != 20 || calls.Load() != 20 || bad.Load() != 0 || rep.Stateless != "2025-06-18" {
			t.Fatalf("%s: ok %d, calls %d, %d not in the 2025 stateless form, dialect %q", refusal, rep.OK, calls.Load(), bad.Load(), rep.Stateless)
		}
	}
}

// countedTroupe is troupeHTTP with a count of the requests it took by
// JSON-RPC method, so a test sees from the server's side what reached it.
type countedTroupe struct {
	url                      string
	initialize, call, others atomic.Int64
}

func newCountedTroupe(t *testing.T) *countedTroupe {
	t.Helper()
	c := &countedTroupe{}
	c.url = troupeHTTPWrapped(t, new(atomic.Int64), func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			switch {
			case bytes.Contains(body, []byte(`"method":"initialize"`)):
				c.initialize.Add(1)
			case bytes.Contains(body, []byte(`"method":"tools/call"`)):
				c.call.Add(1)
			default:
				c.others.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	return c
}

// TestHTTPSpreadOverURLs: a run given two URLs (two troupe servers, as
// the nodes of a cluster) opens its sessions at both round-robin, in each
// mode, and its report counts what went to each URL; the servers' own
// counts agree with the report.
func TestHTTPSpreadOverURLs(t *testing.T) {
	a, b := newCountedTroupe(t), newCountedTroupe(t)
	urls := []string{a.url, b.url}
	rep, err := Run(context.Background(), Options{Target: Target{URLs: urls}, Calls: 400, Concurrency: 4, Sessions: 4,
		Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 400 || rep.OK != 400 || len(rep.Errors) != 0 || rep.Target != a.url+", "+b.url {
		t.Fatalf("report: %+v", rep)
	}
	if a.initialize.Load() != 2 || b.initialize.Load() != 2 {
		t.Fatalf("initialize: %d at the first URL, %d at the second; want 2 each", a.initialize.Load(), b.initialize.Load())
	}
	if len(rep.PerURL) != 2 {
		t.Fatalf("per URL: %+v", rep.PerURL)
	}
	for i, srv := range []*countedTroupe{a, b} {
		u := rep.PerURL[i]
		if u.URL != srv.url || u.Sessions != 2 || u.Calls == 0 || u.Calls != srv.call.Load() || u.OK != u.Calls ||
			u.Latency == nil || u.Latency.P50 <= 0 || u.Latency.Max < u.Latency.P99 {
			t.Errorf("URL %d: %+v (latency %+v); the server took %d calls", i, u, u.Latency, srv.call.Load())
		}
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	rows := perURLRows(out.String())
	for _, u := range []string{a.url, b.url} {
		if r := rows[u]; len(r) != 9 || r[1] != "2" || rows["url"][1] != "sessions" || rows["url"][5] != "p50" {
			t.Errorf("table's row for %s: %q (header %q)\n%s", u, r, rows["url"], out.String())
		}
	}

	// Idle sessions: 6 sessions, 3 at each.
	rep, err = Run(context.Background(), Options{Target: Target{URLs: urls}, Mode: ModeSessions, Sessions: 6, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SessionsOpened != 6 || len(rep.PerURL) != 2 || rep.PerURL[0].Sessions != 3 || rep.PerURL[1].Sessions != 3 ||
		a.initialize.Load() != 5 || b.initialize.Load() != 5 {
		t.Fatalf("sessions: %+v; initialize %d and %d", rep.PerURL, a.initialize.Load(), b.initialize.Load())
	}

	// Stateless callers: 2 at each URL.
	a0, b0 := a.call.Load(), b.call.Load()
	rep, err = Run(context.Background(), Options{Target: Target{URLs: urls}, Stateless: true, Calls: 200, Concurrency: 4,
		Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK != 200 || len(rep.PerURL) != 2 || rep.PerURL[0].Calls != a.call.Load()-a0 || rep.PerURL[1].Calls != b.call.Load()-b0 ||
		rep.PerURL[0].Calls == 0 || rep.PerURL[1].Calls == 0 || rep.PerURL[0].Sessions != 0 {
		t.Fatalf("stateless: %+v; the servers took %d and %d calls", rep.PerURL, a.call.Load()-a0, b.call.Load()-b0)
	}
	out.Reset()
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if rows := perURLRows(out.String()); rows["url"][1] != "calls" || len(rows[b.url]) != 8 {
		t.Fatalf("stateless table (no sessions column):\n%s", out.String())
	}

	// A soak spreads its callers too, and its intervals hold every call.
	rep, err = Run(context.Background(), Options{Target: Target{URLs: urls}, Mode: ModeSoak, Rate: 200, Duration: 400 * time.Millisecond,
		Interval: 200 * time.Millisecond, Concurrency: 2, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.PerURL) != 2 || rep.PerURL[0].Calls == 0 || rep.PerURL[1].Calls == 0 ||
		rep.PerURL[0].Calls+rep.PerURL[1].Calls != rep.Calls || rep.PerURL[0].Sessions != 1 || rep.PerURL[1].Sessions != 1 {
		t.Fatalf("soak: %+v of %d calls", rep.PerURL, rep.Calls)
	}

	// One URL, given either way, reports as it always did: no breakdown.
	for _, target := range []Target{{URL: a.url}, {URLs: []string{a.url}}} {
		rep, err = Run(context.Background(), Options{Target: target, Calls: 10, Timeout: 20 * time.Second})
		if err != nil || rep.OK != 10 || rep.PerURL != nil || rep.Target != a.url {
			t.Fatalf("one URL %+v: %+v, %v", target, rep, err)
		}
	}
}

// perURLRows is the per-URL table of a report's text, each row's fields
// by its first: "url" for the header.
func perURLRows(table string) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "url" || strings.HasPrefix(f[0], "http://")) {
			rows[f[0]] = f
		}
	}
	return rows
}

func TestURLsOptionErrors(t *testing.T) {
	two := []string{"http://a/mcp", "http://b/mcp"}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Target: Target{URL: "http://a/mcp", URLs: two}}, "not both"},
		{Options{Target: Target{URLs: []string{"http://a/mcp", "b:1"}}}, "not an http"},
		{Options{Target: Target{URLs: []string{"http://a/mcp", "http://a/mcp"}}}, "given twice"},
		{Options{Target: Target{URLs: two}, Sessions: 1}, "one session per URL"},
		{Options{Target: Target{URLs: two}, Mode: ModeSessions, Sessions: 1}, "one session per URL"},
		{Options{Target: Target{URLs: two}, Concurrency: 1}, "one caller per URL"},
		{Options{Target: Target{URLs: two}, Stateless: true, Concurrency: 1}, "one caller per URL"},
		{Options{Target: Target{URLs: two, Command: []string{"x"}}}, "exactly one target"},
	} {
		if err := c.o.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v; want %q", c.o, err, c.want)
		}
	}
	// The defaults give every URL a session and a caller.
	o := Options{Target: Target{URLs: append(two, "http://c/mcp")}}
	if err := o.defaults(); err != nil || o.Sessions != 3 || o.Concurrency != 3 {
		t.Fatalf("defaults: sessions %d, concurrency %d, %v", o.Sessions, o.Concurrency, err)
	}
}

// TestHTTPRouteVia: with RouteVia, the sessions are initialized at the
// target (their owner) and every call goes to the other URL, a front that
// forwards it to the owner, as a node of a troupe cluster does; DELETE
// still reaches the owner. Both servers' counts show it.
func TestHTTPRouteVia(t *testing.T) {
	owner := newCountedTroupe(t)
	var frontCalls, frontOther atomic.Int64
	target, _ := url.Parse(strings.TrimSuffix(owner.url, "/mcp"))
	proxy := httputil.NewSingleHostReverseProxy(target)
	// The front's own transport, closed at the end: no connection of
	// http.DefaultTransport outlives the test (goleak checks).
	tr := &http.Transport{Proxy: nil}
	proxy.Transport = tr
	t.Cleanup(tr.CloseIdleConnections)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			frontCalls.Add(1)
		} else {
			frontOther.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	via := front.URL + "/mcp"
	rep, err := Run(context.Background(), Options{Target: Target{URL: owner.url}, RouteVia: via, Calls: 300,
		Concurrency: 4, Sessions: 2, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK != 300 || len(rep.Errors) != 0 || rep.RouteVia != via || rep.Target != owner.url {
		t.Fatalf("report: %+v", rep)
	}
	if owner.initialize.Load() != 2 || frontCalls.Load() != 300 || frontOther.Load() != 0 || owner.call.Load() != 300 {
		t.Fatalf("owner: %d initialize, %d calls; front: %d calls, %d other requests",
			owner.initialize.Load(), owner.call.Load(), frontCalls.Load(), frontOther.Load())
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^calls via +` + regexp.QuoteMeta(via) + ` `).MatchString(out.String()) {
		t.Fatalf("table:\n%s", out.String())
	}

	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Target: Target{URL: owner.url}, RouteVia: "b:1"}, "not an http"},
		{Options{Target: Target{URL: owner.url}, RouteVia: via, Stateless: true}, "no session to route"},
		{Options{Target: Target{URL: owner.url}, RouteVia: via, Mode: ModeSessions}, "makes no calls"},
		{Options{Target: Target{Command: []string{"x"}}, RouteVia: via}, "give --http"},
	} {
		if err := c.o.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v; want %q", c.o, err, c.want)
		}
	}
}
