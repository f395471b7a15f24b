package status

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"troupe/observe"
)

// fakeSource is a Source with a snapshot made up by the test and a
// registry holding one counter.
type fakeSource struct {
	snap observe.Snapshot
	reg  *prometheus.Registry
}

func (f *fakeSource) Snapshot() observe.Snapshot     { return f.snap }
func (f *fakeSource) Registry() *prometheus.Registry { return f.reg }

// hostile is server data written to break out of text into markup: the
// page must show it as text.
const hostile = `<img src=x onerror="document.body.setAttribute('data-pwned','1')">`

func newFake() *fakeSource {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "troupe_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	now := time.Now()
	return &fakeSource{reg: reg, snap: observe.Snapshot{
		Version: "v9.9.9-test", Time: now, UptimeSeconds: 125,
		Sessions: []observe.SessionInfo{
			{ID: "s-0123456789abcdef", Transport: "http", Era: "legacy", Version: "2025-06-18",
				Client: hostile, Started: now.Add(-time.Minute), AgeSeconds: 60, Calls: 2, CallsTotal: 7},
			{ID: "stdio-1", Transport: "stdio", Era: "pending", Started: now, AgeSeconds: 1},
		},
		Calls: []observe.CallInfo{
			{ID: "c-running", Session: "s-0123456789abcdef", Tool: "sleeper", State: "running",
				Started: now.Add(-7 * time.Second), AgeSeconds: 7},
			{ID: "c-waiting", Session: "s-0123456789abcdef", Tool: hostile, State: "waiting_approval",
				Started: now.Add(-2 * time.Second), AgeSeconds: 2},
		},
		Downstreams: []observe.DownstreamStatus{
			{Name: "everything", State: "ready", Tools: 14, Exposed: 3},
			{Name: "broken", State: "down", Err: "cannot start: " + hostile},
		},
		Audit: []observe.AuditEntry{
			{Time: now, Tool: "fs.readFile", Outcome: "ok", Approval: "not_required", DurationSeconds: 0.004,
				CorrelationID: "c-done", Session: "s-0123456789abcdef"},
		},
		Metrics: observe.MetricsSummary{CallsTotal: 1, CallsInFlight: 2, Sessions: 2, ApprovalsPending: 1,
			LatencyP50Seconds: 0.004, LatencyP99Seconds: 0.2, LatencyCalls: 1, LatencyWindowSeconds: 300,
			HTTPRefusedTotal: 4, SpoolBytes: 2048},
		History:              history(),
		HistoryPeriodSeconds: 2,
	}}
}

// history is five minutes of made-up points: a call every other period.
func history() []observe.HistoryPoint {
	out := make([]observe.HistoryPoint, 150)
	for i := range out {
		out[i] = observe.HistoryPoint{Sessions: 2, CallsInFlight: i % 3, Calls: uint32(i % 2), LatencyP50Seconds: 0.004 * float64(i%2)}
	}
	return out
}

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w.Result()
}

// The three paths answer what they promise: the registry in Prometheus'
// format, one page whose Content Security Policy allows exactly its own
// inline script and style, and the snapshot as JSON.
func TestHandlerPaths(t *testing.T) {
	h := New(newFake(), Options{})

	resp := get(t, h, "GET", "/metrics")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "troupe_test_total 3") {
		t.Errorf("/metrics: %d %q", resp.StatusCode, body)
	}

	resp = get(t, h, "GET", "/status")
	body, _ = io.ReadAll(resp.Body)
	page := string(body)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/status: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, hashSource(pageJS)) ||
		!strings.Contains(csp, hashSource(pageCSS)) || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q: want default-src 'none' and the script's and style's hashes", csp)
	}
	if !strings.Contains(page, "<script>"+pageJS+"</script>") || !strings.Contains(page, "<style>"+pageCSS+"</style>") {
		t.Error("the page does not carry its script and style inline, byte for byte")
	}
	for _, external := range []string{"src=\"http", "href=\"http", "@import", "url(http"} {
		if strings.Contains(page, external) {
			t.Errorf("the page loads something from elsewhere (%s)", external)
		}
	}
	if strings.Contains(pageJS, "innerHTML") || strings.Contains(pageJS, "insertAdjacentHTML") || strings.Contains(pageJS, "document.write") {
		t.Error("the page's script writes HTML: server data must go in as text")
	}

	resp = get(t, h, "GET", "/status/")
	var snap observe.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/status/: %d %v", resp.StatusCode, err)
	}
	if snap.Calls[0].Tool != "sleeper" || snap.Downstreams[1].State != "down" {
		t.Errorf("/status/ lost data: %+v", snap)
	}

	if resp := get(t, h, "POST", "/status"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /status: %d", resp.StatusCode)
	}
	if resp := get(t, h, "GET", "/status/x"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /status/x: %d", resp.StatusCode)
	}
}

// The page, in a real headless Chromium, renders the snapshot: calls with
// their states in words, the downstream servers with theirs, sessions by
// transport and era, the audit records and the charts; and data written to
// look like markup stays text (the script ran under the page's CSP, or
// nothing would be rendered at all).
func TestPageRendersInChromium(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(New(newFake(), Options{}))
	defer srv.Close()
	dom := dumpDOM(t, chromium, srv.URL+"/status")

	for _, want := range []string{
		`data-tool="sleeper" data-state="running"`, ">running<", ">waiting for approval<",
		`data-server="broken" data-state="down"`, `data-server="everything" data-state="ready"`,
		">fs.readFile<", ">c-done<", ">v9.9.9-test<", `data-conn="ok"`, "<svg", "<polyline",
		`data-points="150"`, // the served history, drawn at the first load
		`data-col="tools">3 of 14<`, `data-col="calls">7<`, `data-col="in-flight">2<`,
		">Latency p50 (last 5 min)<", ">Latency p99 (last 5 min)<",
		"&lt;img src=x onerror=", // the hostile strings, as text
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %s", want)
		}
	}
	if strings.Contains(dom, `data-pwned="1"`) || strings.Contains(dom, "<img") {
		t.Error("server data became markup")
	}
	if dir := os.Getenv("TROUPE_TEST_ARTIFACTS"); dir != "" {
		png := filepath.Join(dir, "status-page-fake.png")
		screenshot(t, chromium, srv.URL+"/status", png)
		t.Logf("screenshot of the page: %s", png)
	}
}

// screenshot saves a PNG of url as headless Chromium renders it.
func screenshot(t *testing.T, chromium, url, png string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(png), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	cmd := exec.CommandContext(ctx, chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--user-data-dir="+profile,
		"--window-size=1280,900", "--virtual-time-budget=5000", "--hide-scrollbars", "--screenshot="+png, url)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, tail(string(out), 2000))
	}
}

// findChromium is Debian's chromium (scripts/test installs it); the test
// is skipped without it.
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

// dumpDOM loads url in headless Chromium, lets its scripts run for up to
// 5 s of virtual time, and returns the DOM as HTML.
func dumpDOM(t *testing.T, chromium, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	cmd := exec.CommandContext(ctx, chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--user-data-dir="+profile,
		"--window-size=1280,900", "--virtual-time-budget=5000", "--dump-dom", url)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, tail(stderr.String(), 2000))
	}
	return string(out)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
