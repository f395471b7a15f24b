package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

func TestBenchUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench"}, "exactly one target"},
		{[]string{"bench", "--http", "http://127.0.0.1:1/mcp", "--stdio", "x"}, "exactly one target"},
		{[]string{"bench", "--stdio", "x", "--", "y"}, "not both"},
		{[]string{"bench", "--http", "127.0.0.1:1"}, "not an http"},
		{[]string{"bench", "fast", "--stdio", "x"}, "unknown mode"},
		{[]string{"bench", "sessions", "--stdio", "x"}, "HTTP target"},
		{[]string{"bench", "soak", "--stdio", "x"}, "rate and a duration"},
		{[]string{"bench", "--stdio", "x", "--calls", "0"}, "must be positive"},
		{[]string{"bench", "--stdio", "x", "--args", "[1]"}, "JSON object"},
		{[]string{"bench", "--stdio", "x", "--bearer-token-env", "TROUPE_BENCH_UNSET_VAR"}, "not set"},
		{[]string{"bench", "--no-such-flag"}, "flag provided but not defined"},
		{[]string{"bench", "--stateless", "--stdio", "x"}, "need an HTTP target"},
		{[]string{"bench", "sessions", "--stateless", "--http", "http://127.0.0.1:1/mcp"}, "cannot be stateless"},
		{[]string{"bench", "--stateless", "--sessions", "4", "--http", "http://127.0.0.1:1/mcp"}, "open no sessions"},
		{[]string{"bench", "--http", "http://127.0.0.1:1/mcp", "--http", "http://127.0.0.1:1/mcp"}, "given twice"},
		{[]string{"bench", "--http", "http://127.0.0.1:1/mcp", "--http", "127.0.0.1:2"}, "not an http"},
		{[]string{"bench", "--http", "http://127.0.0.1:1/mcp", "--http", "http://127.0.0.1:2/mcp", "--sessions", "1"}, "one session per URL"},
		{[]string{"bench", "--http", "http://127.0.0.1:1/mcp", "--http", "http://127.0.0.1:2/mcp", "--concurrency", "1"}, "one caller per URL"},
		{[]string{"bench", "--stdio", "x", "--sessions", "-1"}, "not negative"},
		{[]string{"bench", "--http", "http://127.0.0.1:1/mcp", "--route-via", "127.0.0.1:2"}, "route via"},
		{[]string{"bench", "--stateless", "--http", "http://127.0.0.1:1/mcp", "--route-via", "http://127.0.0.1:2/mcp"}, "no session to route"},
		{[]string{"bench", "sessions", "--http", "http://127.0.0.1:1/mcp", "--route-via", "http://127.0.0.1:2/mcp"}, "makes no calls"},
	} {
		dir := t.TempDir()
		stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
		code := run(c.args, strings.NewReader(""), stdout, stderr)
		errText, _ := os.ReadFile(stderr.Name())
		if code != 2 || !strings.Contains(string(errText), c.want) {
			t.Errorf("troupe %v: exit %d, stderr %q; want 2 and %q", c.args, code, errText, c.want)
		}
	}
}

func TestBenchServerThatDoesNotStart(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
	if code := run([]string{"bench", "--", "true"}, strings.NewReader(""), stdout, stderr); code != 1 {
		errText, _ := os.ReadFile(stderr.Name())
		t.Fatalf("exit %d: %s", code, errText)
	}
}

// sessionCounter is a minimal streamable-HTTP MCP server that counts the
// sessions opened at it and the calls made to it.
type sessionCounter struct {
	url             string
	sessions, calls atomic.Int64
}

func newSessionCounter(t *testing.T) *sessionCounter {
	t.Helper()
	c := &sessionCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "initialize":
			n := c.sessions.Add(1)
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n))
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"counter","version":"1"}}}`, req.ID)
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case "tools/call":
			c.calls.Add(1)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID)
		}
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL + "/mcp"
	return c
}

// TestBenchSeveralURLs: --http given twice spreads the sessions over both
// servers (by default one each), and the JSON report has a row per URL
// whose counts are what each server saw.
func TestBenchSeveralURLs(t *testing.T) {
	a, b := newSessionCounter(t), newSessionCounter(t)
	dir := t.TempDir()
	stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
	if code := run([]string{"bench", "--calls", "100", "--json", "--http", a.url, "--http", b.url},
		strings.NewReader(""), stdout, stderr); code != 0 {
		errText, _ := os.ReadFile(stderr.Name())
		t.Fatalf("exit %d: %s", code, errText)
	}
	out, _ := os.ReadFile(stdout.Name())
	var rep struct {
		Calls    int64 `json:"calls"`
		Sessions int   `json:"sessions"`
		PerURL   []struct {
			URL      string `json:"url"`
			Sessions int    `json:"sessions"`
			Calls    int64  `json:"calls"`
		} `json:"per_url"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if a.sessions.Load() != 1 || b.sessions.Load() != 1 {
		t.Fatalf("sessions opened: %d at the first URL, %d at the second; want 1 each\n%s", a.sessions.Load(), b.sessions.Load(), out)
	}
	if rep.Calls != 100 || rep.Sessions != 2 || len(rep.PerURL) != 2 {
		t.Fatalf("report: %s", out)
	}
	for i, srv := range []*sessionCounter{a, b} {
		if u := rep.PerURL[i]; u.URL != srv.url || u.Sessions != 1 || u.Calls == 0 || u.Calls != srv.calls.Load() {
			t.Errorf("URL %d: %+v; the server saw %d calls", i, u, srv.calls.Load())
		}
	}

	// The table names both URLs in its per-URL rows.
	stdout = tempFile(t, dir, "out")
	if code := run([]string{"bench", "--calls", "10", "--http", a.url, "--http", b.url}, strings.NewReader(""), stdout, stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	table, _ := os.ReadFile(stdout.Name())
	for _, u := range []string{a.url, b.url} {
		if !strings.Contains(string(table), "\n"+u+"  ") {
			t.Errorf("the table has no row for %s:\n%s", u, table)
		}
	}
}
