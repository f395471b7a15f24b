package loadgen

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"troupe/actors"
	"troupe/limits"
	"troupe/mcphttp"
	"troupe/protocol"
	"troupe/tools"
)

// limitedTroupe serves an echo tool over HTTP with perMinute calls per
// minute for every identity.
func limitedTroupe(t *testing.T, perMinute int) string {
	t.Helper()
	reg, err := tools.NewRegistry(funcTool{name: "echo", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("ok")}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	lim := limits.NewLimiter(limits.NewLocal(), limits.Rules{Default: limits.Limits{CallsPerMinute: perMinute}})
	host := actors.NewHost(actors.Options{Session: actors.SessionOptions{Registry: reg, Limits: lim,
		ServerInfo: protocol.Implementation{Name: "troupe-test", Version: "0"}}, Grace: 2 * time.Second})
	srv := httptest.NewServer(mcphttp.New(host, mcphttp.Options{Limits: lim}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		host.Close(5 * time.Second)
	})
	return srv.URL + "/mcp"
}

// Calls a server refuses over its limits are counted apart: not ok, not
// errors; both the session's -31429 answers and the 2026-07-28 path's
// HTTP 429.
func TestRateLimitedCallsCountedApart(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		rep, err := Run(context.Background(), Options{Target: Target{URL: limitedTroupe(t, 10)}, Stateless: stateless,
			Calls: 30, Concurrency: 2, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Calls != 30 || rep.OK != 10 || rep.RateLimited != 20 || len(rep.Errors) != 0 {
			t.Fatalf("stateless=%v: calls %d ok %d rate limited %d errors %v; want 30, 10, 20 and none",
				stateless, rep.Calls, rep.OK, rep.RateLimited, rep.Errors)
		}
		var out bytes.Buffer
		if err := rep.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		if !hasRow(out.String(), "rate limited", "20") || !hasRow(out.String(), "errors", "none") ||
			!strings.Contains(out.String(), "10 calls per minute") {
			t.Fatalf("stateless=%v: table:\n%s", stateless, out.String())
		}
	}
}

// hasRow reports whether table has a row named name whose value starts
// with value.
func hasRow(table, name, value string) bool {
	for line := range strings.Lines(table) {
		if rest, ok := strings.CutPrefix(line, name); ok && strings.HasPrefix(strings.TrimSpace(rest), value) {
			return true
		}
	}
	return false
}
