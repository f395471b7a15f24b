package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The operators' views of a running troupe, end to end: the status page in
// a real headless browser (Debian's chromium, which scripts/test installs)
// and /metrics as Prometheus parses it.

// statusConfig is troupe's config for these tests: a command tool that
// sleeps (a call left in flight), one that answers at once, and a
// downstream server that cannot start (it exits at once), so the page has
// a server in a state other than ready. With the everything server
// installed (scripts/test), a ready one too.
func statusConfig(t *testing.T, withEverything bool) string {
	t.Helper()
	tables := `
[mcp.sleeper]
command = "sleep"
args = ["30"]
requires_approval = false
description = "Sleeps for 30 s."

[mcp.hello]
command = "echo"
args = ["hello"]
requires_approval = false
description = "Says hello."

[limits]
mcp_servers_startup_wait = "8s"
# A call left running when a test fails early must not hold the exit.
shutdown_grace = "2s"

[mcp_servers.broken]
command = "false"
env_vars = ["PATH"]
sandbox_profile = "none"
startup_timeout_sec = 5
`
	if withEverything {
		command, args := everythingStdioCommand(t)
		// Three of its tools enabled: the page says "3 of N".
		tables += stdioServerTable("everything", command, args, `enabled_tools = ["echo", "get-sum", "get-tiny-image"]`)
	}
	return downstreamConfig(t, tables)
}

// mcpSession is a minimal streamable HTTP client of one 2025-06-18 session,
// enough to leave a call in flight.
type mcpSession struct {
	srv *httpServer
	id  string
}

// post sends one JSON-RPC message on the session and returns the response
// (the caller closes its body).
func (s *mcpSession) post(ctx context.Context, t *testing.T, msg string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.url, strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.srv.token)
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	client := &http.Client{Transport: loopbackClient.Transport} // no timeout: a call may stream
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		t.Fatalf("POST %s: %v", msg, err)
	}
	return resp
}

// openSession initializes a session with a bearer token.
func openSession(t *testing.T, srv *httpServer) *mcpSession {
	t.Helper()
	s := &mcpSession{srv: srv}
	resp := s.post(t.Context(), t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"troupe-e2e-status","version":"0.0.0"}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if s.id = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != http.StatusOK || s.id == "" {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	resp = s.post(t.Context(), t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	return s
}

// call calls tool and reads its answer to the end.
func (s *mcpSession) call(t *testing.T, id int, tool string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp := s.post(ctx, t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool))
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("calling %s: %s %s", tool, resp.Status, body)
	}
	return string(body)
}

// startCall calls tool and leaves the call running: the request (an SSE
// stream that stays open until the result) is read in the background
// until the test ends or the session is deleted.
func (s *mcpSession) startCall(t *testing.T, id int, tool string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		resp := s.post(ctx, t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool))
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
}

// end deletes the session: troupe stops its calls.
func (s *mcpSession) end(t *testing.T) {
	t.Helper()
	resp := s.srv.request(t, http.MethodDelete, nil, map[string]string{"Mcp-Session-Id": s.id})
	resp.Body.Close()
}

// statusSnapshot is the part of /status/'s JSON these tests read.
type statusSnapshot struct {
	Calls []struct {
		ID    string `json:"id"`
		Tool  string `json:"tool"`
		State string `json:"state"`
	} `json:"calls"`
	Downstreams []struct {
		Name    string `json:"name"`
		State   string `json:"state"`
		Tools   int    `json:"tools"`
		Exposed int    `json:"tools_exposed"`
		Err     string `json:"error"`
	} `json:"downstreams"`
	History []json.RawMessage `json:"history"`
}

// adminGet fetches one of the operators' paths with the bearer token.
func adminGet(t *testing.T, srv *httpServer, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+srv.token)
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// waitStatus polls /status/ until ok accepts the snapshot.
func waitStatus(t *testing.T, srv *httpServer, what string, ok func(statusSnapshot) bool) statusSnapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := adminGet(t, srv, "/status/")
		var s statusSnapshot
		if code == http.StatusOK && json.Unmarshal(body, &s) == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("/status/ never showed %s: %d %s", what, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStatusPageInBrowser: troupe serving HTTP with a token, a command
// tool's call left running and a downstream server that failed. Headless
// Chromium opens /status?token=…, is sent on to /status with a cookie, and
// the page it renders shows the call (its tool, "running") and the server
// with its state; the token is nowhere in the page; a screenshot is kept as
// a test artifact. /status without a token or cookie is refused.
func TestStatusPageInBrowser(t *testing.T) {
	chromium := findChromium(t)
	_, everythingErr := os.Stat(filepath.Join(downstreamPackage("server-everything"), "dist", "index.js"))
	_, nodeErr := exec.LookPath("node")
	withEverything := everythingErr == nil && nodeErr == nil
	fx := newFixture(t)
	token := newToken(t)
	srv := startHTTPServer(t, fx.dir, token, "--config", statusConfig(t, withEverything))

	for _, path := range []string{"/status", "/status/", "/metrics"} {
		resp, err := loopbackClient.Get(srv.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a token or cookie: %s, want 401", path, resp.Status)
		}
	}

	s := openSession(t, srv)
	// Two calls that finish, then one left running: the session made 3.
	for id := range 2 {
		if answer := s.call(t, 10+id, "hello"); !strings.Contains(answer, "hello") {
			t.Fatalf("calling hello: %s", answer)
		}
	}
	s.startCall(t, 2, "sleeper")
	snap := waitStatus(t, srv, "the sleeper running and the broken server down", func(s statusSnapshot) bool {
		running, broken := false, false
		for _, c := range s.Calls {
			running = running || c.Tool == "sleeper" && c.State == "running"
		}
		for _, d := range s.Downstreams {
			broken = broken || d.Name == "broken" && d.State != "connecting" && d.State != "ready"
		}
		return running && broken
	})
	var brokenState string
	for _, d := range snap.Downstreams {
		if d.Name == "broken" {
			brokenState = d.State
		}
	}
	everythingTools := 0
	if withEverything {
		waitStatus(t, srv, "the everything server ready", func(s statusSnapshot) bool {
			for _, d := range s.Downstreams {
				if d.Name == "everything" && d.State == "ready" {
					everythingTools = d.Tools
					return true
				}
			}
			return false
		})
	}
	// Some seconds of history: more points than a page could sample
	// itself in the 5 s of virtual time Chromium gives it.
	waitStatus(t, srv, "10 points of history", func(s statusSnapshot) bool { return len(s.History) >= 10 })

	url := srv.base + "/status?token=" + token
	dom := dumpDOM(t, chromium, url)
	for _, want := range []string{
		`data-tool="sleeper" data-state="running"`, ">sleeper<", ">running<",
		`data-server="broken" data-state="` + brokenState + `"`, ">broken<", ">" + brokenState + "<",
		`data-conn="ok"`,
		// The session's calls (the test's only session): 3 made, 1 in flight.
		`data-col="calls">3<`, `data-col="in-flight">1<`,
		// The latency tiles say their window.
		">Latency p50 (last ", ">Latency p99 (last ",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page in Chromium lacks %s", want)
		}
	}
	// The charts start from troupe's history, not from the page's samples.
	for _, m := range regexp.MustCompile(`data-points="(\d+)"`).FindAllStringSubmatch(dom, -1) {
		if n, _ := strconv.Atoi(m[1]); n < 10 {
			t.Errorf("a chart has %s points at the first load, want the served history (10 or more)", m[1])
		}
	}
	if !strings.Contains(dom, `data-points="`) {
		t.Error("the page in Chromium has no chart of the served history")
	}
	if withEverything {
		if !strings.Contains(dom, `data-server="everything" data-state="ready"`) {
			t.Error("the page in Chromium does not show the everything server ready")
		}
		if want := fmt.Sprintf(`data-col="tools">3 of %d<`, everythingTools); everythingTools <= 3 || !strings.Contains(dom, want) {
			t.Errorf("the page in Chromium lacks %s (everything lists %d tools)", want, everythingTools)
		}
	}
	if strings.Contains(dom, token) {
		t.Error("the token is in the page")
	}
	// One process: no cluster section, no owner column (cluster_obs_test.go
	// has a node's).
	for _, absent := range []string{`id="cluster"`, `data-col="owner"`} {
		if strings.Contains(dom, absent) {
			t.Errorf("one process's page has %s", absent)
		}
	}
	if t.Failed() {
		t.Logf("the DOM Chromium rendered:\n%s", dom)
	}

	png := filepath.Join(artifactsDir(t), "status-page.png")
	screenshot(t, chromium, url, png)
	if info, err := os.Stat(png); err != nil || info.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", png, err)
	}
	t.Logf("screenshot of the status page: %s", png)
	s.end(t)
}

// TestMetricsMoveWithCallsAndRefusals: after a call and a request with a
// wrong token, /metrics (as Prometheus' own parser reads it) counts the
// call by tool, outcome and era, and the refusal by status.
func TestMetricsMoveWithCallsAndRefusals(t *testing.T) {
	fx := newFixture(t)
	token := newToken(t)
	srv := startHTTPServer(t, fx.dir, token, "--config", statusConfig(t, false))

	before := scrape(t, srv)
	s := openSession(t, srv)
	if answer := s.call(t, 2, "hello"); !strings.Contains(answer, "hello") {
		t.Fatalf("calling hello: %s", answer)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer not-the-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %s, want 401", resp.Status)
	}
	s.end(t)

	calls := map[string]string{"tool": "hello", "outcome": "ok", "era": "legacy", "identity": "token:default"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := scrape(t, srv)
		callsMoved := counter(after, "troupe_calls_total", calls)-counter(before, "troupe_calls_total", calls) == 1
		refusedMoved := counter(after, "troupe_http_refused_total", map[string]string{"status": "401"}) >
			counter(before, "troupe_http_refused_total", map[string]string{"status": "401"})
		if callsMoved && refusedMoved {
			// One process: no series carries a node label.
			for name, f := range after {
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "node" {
							t.Errorf("one process's %s has a node label", name)
						}
					}
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a call and a refusal: troupe_calls_total%v moved %v, troupe_http_refused_total{status=401} moved %v",
				calls, callsMoved, refusedMoved)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape reads /metrics with the bearer token through Prometheus' text
// parser.
func scrape(t *testing.T, srv *httpServer) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := adminGet(t, srv, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus' text format: %v", err)
	}
	return families
}

// counter is the value of the counter (or gauge) of family with exactly
// these labels; 0 when there is none yet.
func counter(families map[string]*dto.MetricFamily, family string, labels map[string]string) float64 {
	f, ok := families[family]
	if !ok {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// findChromium is Debian's chromium (scripts/test installs it); tests that
// need it are skipped without it.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed: run scripts/test")
	return ""
}

// chromiumArgs are the flags of every headless run: a profile of its own
// (removed with the test), a fixed window, and 5 s of virtual time for the
// page's scripts (its first poll, two more).
func chromiumArgs(profile string, extra ...string) []string {
	return append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--no-default-browser-check", "--disable-extensions", "--user-data-dir=" + profile,
		"--window-size=1280,900", "--virtual-time-budget=5000"}, extra...)
}

// dumpDOM loads url in headless Chromium and returns the DOM as HTML once
// the page's scripts have run.
func dumpDOM(t *testing.T, chromium, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	cmd := exec.CommandContext(ctx, chromium, chromiumArgs(profile, "--dump-dom", url)...)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, lastBytes(stderr.String(), 2000))
	}
	return string(out)
}

// screenshot saves a PNG of url as headless Chromium renders it.
func screenshot(t *testing.T, chromium, url, png string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	cmd := exec.CommandContext(ctx, chromium, chromiumArgs(profile, "--hide-scrollbars", "--screenshot="+png, url)...)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, lastBytes(string(out), 2000))
	}
}

// artifactsDir is where tests keep what a person may want to look at
// afterwards (the status page's screenshot): $TROUPE_TEST_ARTIFACTS, else
// e2e/artifacts (ignored by git).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TROUPE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(moduleRoot, "e2e", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts directory: %v", err)
	}
	return dir
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
