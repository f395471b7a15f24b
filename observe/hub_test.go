package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"troupe/actors"
	"troupe/audit"
	"troupe/limits"
	"troupe/sandbox"
)

// testTools is a registry: two first-party tools, Codex, and a tool
// proxied to the downstream server "github".
func testTools() map[string]string {
	return map[string]string{"shell": "first-party", "read_file": "first-party", "codex": "[codex]", "gh_search": "github"}
}

// call runs one call through the Hub as the host would: started, running,
// finished with outcome after took.
func call(h *Hub, id, session, tool, version, outcome string, took time.Duration) {
	started := time.Now().Add(-took)
	c := &actors.CallView{ID: id, Session: session, Identity: "local", Tool: tool, Version: version, Started: started}
	h.CallStarted(t0ctx(), c)
	h.CallStateChanged(c, actors.CallRunning)
	h.CallFinished(c, &audit.Record{Event: "call", Session: session, Tool: tool, Approval: "not_required",
		Started: started, Stopped: started.Add(took), Outcome: outcome, CorrelationID: id})
}

// histogramCount is how many observations a histogram's child holds.
func histogramCount(t *testing.T, h *Hub, name string, labels map[string]string) uint64 {
	t.Helper()
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

func TestCallsMoveCountersAndHistograms(t *testing.T) {
	h := New(Options{Version: "test"})
	h.SetTools(testTools())
	h.SessionStarted("s1", "stdio", "local")
	h.SessionInitialized("s1", "2025-06-18", "claude")

	call(h, "c-1", "s1", "shell", "2025-06-18", "ok", 30*time.Millisecond)
	call(h, "c-2", "s1", "shell", "2025-06-18", "ok", 2*time.Second)
	call(h, "c-3", "s1", "shell", "2025-06-18", "deadline_exceeded", time.Minute)
	call(h, "c-4", "s1", "gh_search", "2026-07-28", "ok", time.Second)

	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("shell", "ok", "legacy", "local")); got != 2 {
		t.Errorf("calls{shell,ok,legacy} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("shell", "deadline_exceeded", "legacy", "local")); got != 1 {
		t.Errorf("calls{shell,deadline_exceeded,legacy} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("gh_search", "ok", "modern", "local")); got != 1 {
		t.Errorf("calls{gh_search,ok,modern} = %v, want 1", got)
	}
	if n := histogramCount(t, h, "troupe_call_duration_seconds", map[string]string{"tool": "shell"}); n != 3 {
		t.Errorf("call_duration{shell} count = %d, want 3", n)
	}
	if n := histogramCount(t, h, "troupe_downstream_call_duration_seconds", map[string]string{"server": "github"}); n != 1 {
		t.Errorf("downstream_call_duration{github} count = %d, want 1", n)
	}
	if n := testutil.CollectAndCount(h.m.downstreamCall); n != 1 {
		t.Errorf("downstream_call_duration has %d series, want 1 (only proxied tools)", n)
	}
	s := h.Snapshot()
	if s.Metrics.CallsTotal != 4 || s.Metrics.CallsFailed != 1 {
		t.Errorf("snapshot calls total/failed = %d/%d, want 4/1", s.Metrics.CallsTotal, s.Metrics.CallsFailed)
	}
	// Three of four calls took between 1s and 2.5s or less: the median is
	// in a bucket at most 2.5s; the 99th percentile in (30s, 60s].
	if p := s.Metrics.LatencyP50Seconds; p <= 0 || p > 2.5 {
		t.Errorf("p50 = %v, want in (0, 2.5]", p)
	}
	if p := s.Metrics.LatencyP99Seconds; p <= 30 || p > 60 {
		t.Errorf("p99 = %v, want in (30, 60]", p)
	}
}

func TestApprovals(t *testing.T) {
	h := New(Options{})
	h.SetTools(testTools())
	c := &actors.CallView{ID: "c-1", Session: "s1", Tool: "shell", Version: "2025-06-18", Started: time.Now()}
	h.CallStarted(t0ctx(), c)
	h.CallStateChanged(c, actors.CallWaitingApproval)
	if n := h.Snapshot().Metrics.ApprovalsPending; n != 1 {
		t.Fatalf("approvals pending = %d, want 1", n)
	}
	if got := gaugeValue(t, h, "troupe_approvals_pending"); got != 1 {
		t.Errorf("troupe_approvals_pending = %v, want 1", got)
	}
	h.ApprovalDecided(c, "approved", 3*time.Second)
	h.CallStateChanged(c, actors.CallRunning)
	if n := h.Snapshot().Metrics.ApprovalsPending; n != 0 {
		t.Errorf("approvals pending after the decision = %d, want 0", n)
	}
	h.ApprovalDecided(nil, "something new", time.Second)
	if got := testutil.ToFloat64(h.m.approvals.WithLabelValues("approved")); got != 1 {
		t.Errorf("approvals{approved} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.m.approvals.WithLabelValues("other")); got != 1 {
		t.Errorf("approvals{other} = %v, want 1", got)
	}
	if n := histogramCount(t, h, "troupe_approval_wait_seconds", map[string]string{"outcome": "approved"}); n != 1 {
		t.Errorf("approval_wait{approved} count = %d, want 1", n)
	}
	// A call that finishes while waiting (cancelled) is no longer pending.
	c2 := &actors.CallView{ID: "c-2", Session: "s1", Tool: "shell", Started: time.Now()}
	h.CallStarted(t0ctx(), c2)
	h.CallStateChanged(c2, actors.CallWaitingApproval)
	h.CallFinished(c2, &audit.Record{Tool: "shell", Outcome: "cancelled", CorrelationID: "c-2"})
	if n := h.Snapshot().Metrics.ApprovalsPending; n != 0 {
		t.Errorf("approvals pending after a waiting call ended = %d, want 0", n)
	}
}

// gaugeValue gathers a gauge without labels.
func gaugeValue(t *testing.T, h *Hub, name string) float64 {
	t.Helper()
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Tool calls are counted and timed by the identity's bounded label: a
// token's name, or the kind for an OAuth subject (never the subject).
func TestCallsNameTheirIdentity(t *testing.T) {
	h := New(Options{})
	h.SetTools(testTools())
	now := time.Now()
	for i, who := range []string{"token:alice", "token:alice", "oauth:subject-42", "token:bob"} {
		c := &actors.CallView{ID: fmt.Sprintf("c-%d", i), Session: "s", Identity: who, Tool: "shell", Version: "2025-06-18", Started: now}
		h.CallStarted(t0ctx(), c)
		h.CallFinished(c, &audit.Record{Tool: "shell", Outcome: "ok", Identity: who, Started: now, Stopped: now.Add(time.Millisecond)})
	}
	h.CallFinished(nil, &audit.Record{Tool: "shell", Outcome: "cancelled", Identity: "token:bob"})
	for _, c := range []struct {
		outcome, who string
		want         float64
	}{{"ok", "token:alice", 2}, {"ok", "oauth", 1}, {"ok", "token:bob", 1}} {
		if got := testutil.ToFloat64(h.m.calls.WithLabelValues("shell", c.outcome, "legacy", c.who)); got != c.want {
			t.Errorf("calls{shell,%s,legacy,%s} = %v, want %v", c.outcome, c.who, got, c.want)
		}
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("shell", "cancelled", "unknown", "token:bob")); got != 1 {
		t.Errorf("bob's call cancelled before an invoker took it: %v, want 1", got)
	}
	if n := histogramCount(t, h, "troupe_call_duration_seconds", map[string]string{"tool": "shell", "identity": "token:alice"}); n != 2 {
		t.Errorf("call_duration{shell,token:alice} count = %d, want 2", n)
	}
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "subject-42") {
					t.Errorf("%s has the OAuth subject as a label: %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func TestLabelsBounded(t *testing.T) {
	h := New(Options{})
	h.SetTools(testTools())
	h.SessionStarted("s1", "carrier-pigeon", "local")
	for i := range 20 {
		call(h, fmt.Sprintf("c-%d", i), "s1", fmt.Sprintf("no_such_tool_%d", i), "1999-01-01", fmt.Sprintf("Weird Outcome %d", i), time.Millisecond)
	}
	h.CallFinished(nil, &audit.Record{Tool: "/etc/passwd", Outcome: "cancelled"})
	h.HTTPRefused(401)
	h.HTTPRefused(7)
	h.SandboxStarted(sandbox.Profile("my-own"), time.Millisecond, nil)

	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]map[string]bool{
		"tool":      {"shell": true, "read_file": true, "codex": true, "gh_search": true, "unknown": true},
		"outcome":   {"other": true, "cancelled": true},
		"transport": {"stdio": true, "http": true, "other": true},
		"status":    {"401": true, "other": true},
		"profile":   {"none": true, "default": true, "seatbelt": true, "other": true},
		"identity":  {"local": true, "unknown": true},
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if ok, bounded := allowed[l.GetName()]; bounded && !ok[l.GetValue()] {
					t.Errorf("%s has label %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
				if strings.Contains(l.GetValue(), "c-") || strings.Contains(l.GetValue(), "s1") {
					t.Errorf("%s has an id as label: %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("unknown", "other", "legacy", "local")); got != 20 {
		t.Errorf("calls{unknown,other,legacy} = %v, want 20", got)
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("unknown", "cancelled", "unknown", "unknown")); got != 1 {
		t.Errorf("calls{unknown,cancelled,unknown} = %v, want 1 (a call cancelled before an invoker took it)", got)
	}
	// The page may show the name the client asked for: it is no label.
	if a := h.Snapshot().Audit[0]; a.Tool != "/etc/passwd" {
		t.Errorf("newest audit entry's tool = %q", a.Tool)
	}
}

func TestSetToolsAgainKeepsCounts(t *testing.T) {
	h := New(Options{})
	h.SetTools(map[string]string{"shell": "first-party"})
	call(h, "c-1", "s", "shell", "2025-06-18", "ok", time.Millisecond)
	call(h, "c-2", "s", "later", "2025-06-18", "ok", time.Millisecond)
	h.SetTools(map[string]string{"shell": "first-party", "later": "github"})
	call(h, "c-3", "s", "shell", "2025-06-18", "ok", time.Millisecond)
	call(h, "c-4", "s", "later", "2025-06-18", "ok", time.Millisecond)
	for _, c := range []struct {
		tool string
		want float64
	}{{"shell", 2}, {"later", 1}, {"unknown", 1}} {
		if got := testutil.ToFloat64(h.m.calls.WithLabelValues(c.tool, "ok", "legacy", "local")); got != c.want {
			t.Errorf("calls{%s} = %v, want %v", c.tool, got, c.want)
		}
	}
	if n := histogramCount(t, h, "troupe_downstream_call_duration_seconds", map[string]string{"server": "github"}); n != 1 {
		t.Errorf("downstream_call_duration{github} count = %d, want 1", n)
	}
}

// A downstream server that renames its tools again and again (or a reload
// that drops some) leaves no series behind: only the tools listed now,
// and "unknown", are tool label values. The tools that stay keep their
// counts.
func TestSeriesOfGoneToolsGo(t *testing.T) {
	h := New(Options{})
	h.SetTools(map[string]string{"shell": "first-party", "gh_search": "github"})
	call(h, "c-shell", "s", "shell", "2025-06-18", "ok", time.Millisecond)
	for i := range 300 {
		tools := map[string]string{"shell": "first-party", "gh_search": "github"}
		for k := range 5 {
			tools[fmt.Sprintf("churn_%d_%d", i, k)] = "evil"
		}
		h.SetTools(tools)
		for name := range tools {
			call(h, fmt.Sprintf("c-%d-%s", i, name), "s", name, "2025-06-18", "ok", time.Millisecond)
			call(h, fmt.Sprintf("d-%d-%s", i, name), "s", name, "2026-07-28", "tool_error", time.Millisecond)
		}
	}
	h.SetTools(map[string]string{"shell": "first-party", "gh_search": "github"})

	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			series++
			for _, l := range m.GetLabel() {
				if l.GetName() == "tool" && strings.HasPrefix(l.GetValue(), "churn_") {
					t.Fatalf("%s still has the series of the gone tool %q", mf.GetName(), l.GetValue())
				}
			}
		}
	}
	if series > 200 {
		t.Errorf("%d series after 300 tool lists", series)
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("shell", "ok", "legacy", "local")); got != 301 {
		t.Errorf("calls{shell,ok,legacy} = %v, want 301 (kept across the lists)", got)
	}
	if n := histogramCount(t, h, "troupe_call_duration_seconds", map[string]string{"tool": "gh_search"}); n != 600 {
		t.Errorf("call_duration{gh_search} count = %d, want 600", n)
	}
	// A call of a tool that leaves while it runs records as "unknown" and
	// does not bring the series back.
	h.SetTools(map[string]string{"shell": "first-party", "leaving": "evil"})
	c := &actors.CallView{ID: "c-leaving", Session: "s", Tool: "leaving", Version: "2025-06-18", Started: time.Now()}
	h.CallStarted(t0ctx(), c)
	h.SetTools(map[string]string{"shell": "first-party"})
	h.CallFinished(c, &audit.Record{Tool: "leaving", Outcome: "ok", Started: c.Started, Stopped: time.Now()})
	if n := testutil.CollectAndCount(h.m.calls, "troupe_calls_total"); n != 3 {
		t.Errorf("calls_total has %d series, want 3 (shell ok/legacy, shell tool_error/modern, unknown)", n)
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("unknown", "ok", "legacy", "unknown")); got != 1 {
		t.Errorf("calls{unknown,ok,legacy} = %v, want 1 (the call of the tool that left)", got)
	}
	// A tool that comes back starts again from nothing.
	h.SetTools(map[string]string{"shell": "first-party", "churn_0_0": "evil"})
	call(h, "c-back", "s", "churn_0_0", "2025-06-18", "ok", time.Millisecond)
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("churn_0_0", "ok", "legacy", "local")); got != 1 {
		t.Errorf("calls{churn_0_0,ok,legacy} = %v, want 1", got)
	}
}

// What the page shows that a client or a downstream server chose (a
// client's name, the name of a tool that does not exist, a server's error)
// is kept clipped, so neither the Hub's memory nor /status/ grows with
// what they send.
func TestLiveViewKeepsClientStringsBounded(t *testing.T) {
	huge := strings.Repeat("é", 1<<20) // 2 MB, clipped at a rune boundary
	h := New(Options{Downstreams: func() []DownstreamStatus {
		return []DownstreamStatus{{Name: "evil", State: "failed", Err: huge}}
	}})
	h.SetTools(testTools())
	for i := range 40 {
		id := fmt.Sprintf("s%d", i)
		h.SessionStarted(id, "http", "local")
		h.SessionInitialized(id, "2025-06-18", huge)
	}
	for i := range auditKept {
		call(h, fmt.Sprintf("c-%d", i), "s0", huge, "2025-06-18", "ok", time.Millisecond)
	}
	snap := h.Snapshot()
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 256<<10 {
		t.Fatalf("/status/ JSON is %d bytes for 40 sessions, 50 audit records and one server", len(b))
	}
	for _, s := range []string{snap.Sessions[0].Client, snap.Audit[0].Tool} {
		if !strings.HasPrefix(s, "éé") || !strings.HasSuffix(s, "…") || len(s) > 256+len("…") || !utf8.ValidString(s) {
			t.Fatalf("kept %d bytes: %.40q…", len(s), s)
		}
	}
	if e := snap.Downstreams[0].Err; len(e) > 1024+len("…") || !utf8.ValidString(e) {
		t.Fatalf("a downstream's error is shown with %d bytes", len(e))
	}
}

func TestHTTPRefused(t *testing.T) {
	h := New(Options{})
	h.HTTPRefused(401)
	h.HTTPRefused(401)
	h.HTTPRefused(503)
	want := `
# HELP troupe_http_refused_total HTTP requests the MCP endpoint refused itself, by status code (401, 403, 404, 429, 503, ...).
# TYPE troupe_http_refused_total counter
troupe_http_refused_total{status="401"} 2
troupe_http_refused_total{status="503"} 1
`
	if err := testutil.GatherAndCompare(h.Registry(), strings.NewReader(want), "troupe_http_refused_total"); err != nil {
		t.Error(err)
	}
	if n := h.Snapshot().Metrics.HTTPRefusedTotal; n != 3 {
		t.Errorf("snapshot refused = %d, want 3", n)
	}
}

func TestSandboxStarts(t *testing.T) {
	h := New(Options{})
	h.SandboxStarted(sandbox.ProfileDefault, 3*time.Millisecond, nil)
	h.SandboxStarted(sandbox.ProfileDefault, 4*time.Millisecond, nil)
	h.SandboxStarted(sandbox.ProfileDefault, 0, &sandbox.StartError{Stage: "policy", Err: errors.New("no landlock")})
	h.SandboxStarted(sandbox.ProfileNone, 0, fmt.Errorf("wrapped: %w", &sandbox.StartError{Stage: "landlock", Err: errors.New("x")}))
	h.SandboxStarted(sandbox.ProfileNone, 0, errors.New("plain"))
	if got := testutil.ToFloat64(h.m.sandboxStarts.WithLabelValues("default")); got != 2 {
		t.Errorf("sandbox_starts{default} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(h.m.sandboxRefusals.WithLabelValues("default")); got != 1 {
		t.Errorf("sandbox_refusals{default} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.m.sandboxFailures.WithLabelValues("none", "landlock")); got != 1 {
		t.Errorf("sandbox_start_failures{none,landlock} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.m.sandboxFailures.WithLabelValues("none", "other")); got != 1 {
		t.Errorf("sandbox_start_failures{none,other} = %v, want 1", got)
	}
	if n := histogramCount(t, h, "troupe_sandbox_start_duration_seconds", map[string]string{"profile": "default"}); n != 2 {
		t.Errorf("sandbox_start_duration{default} count = %d, want 2", n)
	}
}

func TestDownstreams(t *testing.T) {
	h := New(Options{})
	for _, s := range []string{"connecting", "ready", "failed", "connecting", "ready", "ready"} {
		h.DownstreamChanged("github", s)
	}
	h.DownstreamChanged("jira", "connecting")
	if got := testutil.ToFloat64(h.m.reconnects.WithLabelValues("github")); got != 1 {
		t.Errorf("reconnects{github} = %v, want 1", got)
	}
	for _, s := range []string{"connecting", "ready", "failed", "closed", "other"} {
		want := 0.0
		if s == "ready" {
			want = 1
		}
		if got := testutil.ToFloat64(h.m.downstreamState.WithLabelValues("github", s)); got != want {
			t.Errorf("downstream_state{github,%s} = %v, want %v", s, got, want)
		}
	}
	got := h.Snapshot().Downstreams
	want := []DownstreamStatus{{Name: "github", State: "ready"}, {Name: "jira", State: "connecting"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("snapshot downstreams = %v, want %v", got, want)
	}

	listed := []DownstreamStatus{{Name: "z", State: "failed", Err: "connection refused"}, {Name: "a", State: "ready", Tools: 3}}
	h2 := New(Options{Downstreams: func() []DownstreamStatus { return listed }})
	h2.DownstreamChanged("ignored", "ready")
	got = h2.Snapshot().Downstreams
	if len(got) != 2 || got[0].Name != "a" || got[0].Tools != 3 || got[1].Err != "connection refused" {
		t.Errorf("snapshot downstreams from Options.Downstreams = %+v", got)
	}
}

func TestAuditFlushedAndSpool(t *testing.T) {
	h := New(Options{SpoolBytes: func() int64 { return 4096 }})
	h.AuditFlushed(3, 2*time.Millisecond)
	h.AuditFlushed(1, time.Millisecond)
	if n := histogramCount(t, h, "troupe_audit_batch_records", nil); n != 2 {
		t.Errorf("audit_batch_records count = %d, want 2", n)
	}
	if n := histogramCount(t, h, "troupe_audit_flush_duration_seconds", nil); n != 2 {
		t.Errorf("audit_flush_duration count = %d, want 2", n)
	}
	if got := gaugeValue(t, h, "troupe_spool_bytes"); got != 4096 {
		t.Errorf("spool_bytes = %v, want 4096", got)
	}
	if got := h.Snapshot().Metrics.SpoolBytes; got != 4096 {
		t.Errorf("snapshot spool bytes = %d", got)
	}
	if got := New(Options{}).Snapshot().Metrics.SpoolBytes; got != -1 {
		t.Errorf("snapshot spool bytes without SpoolBytes = %d, want -1", got)
	}
}

func TestLiveView(t *testing.T) {
	h := New(Options{Version: "1.2.3"})
	h.SetTools(testTools())
	h.SessionStarted("s1", "http", "local")
	h.SessionStarted("s2", "stdio", "local")
	h.SessionInitialized("s1", "2025-11-25", "inspector")

	c := &actors.CallView{ID: "c-1", Session: "s1", Tool: "shell", Version: "2025-11-25", Started: time.Now().Add(-time.Second)}
	h.CallStarted(t0ctx(), c)
	s := h.Snapshot()
	if len(s.Calls) != 1 || s.Calls[0].State != "starting" {
		t.Fatalf("calls = %+v, want one starting", s.Calls)
	}
	h.CallStateChanged(c, actors.CallStreaming)
	s = h.Snapshot()
	if got := s.Calls[0]; got.ID != "c-1" || got.Session != "s1" || got.Tool != "shell" || got.State != "streaming" || got.AgeSeconds < 1 {
		t.Errorf("call = %+v", got)
	}
	if len(s.Sessions) != 2 || s.Sessions[0].ID != "s1" || s.Sessions[0].Calls != 1 || s.Sessions[0].Era != "legacy" ||
		s.Sessions[0].Client != "inspector" || s.Sessions[0].Transport != "http" || s.Sessions[1].Era != "pending" {
		t.Errorf("sessions = %+v", s.Sessions)
	}
	if s.Metrics.Sessions != 2 || s.Metrics.CallsInFlight != 1 || s.Version != "1.2.3" {
		t.Errorf("metrics = %+v, version %q", s.Metrics, s.Version)
	}
	if got := gaugeValue(t, h, "troupe_calls_in_flight"); got != 1 {
		t.Errorf("calls_in_flight = %v", got)
	}
	if got := testutil.ToFloat64(h.m.sessions.WithLabelValues("http", "legacy")); got != 1 {
		t.Errorf("sessions{http,legacy} = %v", got)
	}

	h.CallFinished(c, &audit.Record{Session: "s1", Tool: "shell", Approval: "approved", Started: c.Started,
		Stopped: c.Started.Add(1500 * time.Millisecond), Outcome: "ok", CorrelationID: "c-1"})
	h.SessionEnded("s1")
	h.SessionEnded("s2")
	h.SessionEnded("s2") // twice: no harm
	s = h.Snapshot()
	if len(s.Calls) != 0 || len(s.Sessions) != 0 {
		t.Errorf("after the end: calls %+v, sessions %+v", s.Calls, s.Sessions)
	}
	if len(s.Audit) != 1 {
		t.Fatalf("audit = %+v", s.Audit)
	}
	if a := s.Audit[0]; a.Tool != "shell" || a.Outcome != "ok" || a.Approval != "approved" || a.DurationSeconds != 1.5 ||
		a.CorrelationID != "c-1" || a.Session != "s1" || !a.Time.Equal(c.Started.Add(1500*time.Millisecond)) {
		t.Errorf("audit entry = %+v", a)
	}
	if got := gaugeValue(t, h, "troupe_calls_in_flight"); got != 0 {
		t.Errorf("calls_in_flight = %v", got)
	}
	for _, l := range [][2]string{{"http", "legacy"}, {"stdio", "pending"}} {
		if got := testutil.ToFloat64(h.m.sessions.WithLabelValues(l[0], l[1])); got != 0 {
			t.Errorf("sessions{%s,%s} = %v after the end", l[0], l[1], got)
		}
	}
}

func TestHiddenModernSessionTakesItsEraFromCalls(t *testing.T) {
	h := New(Options{})
	h.SessionStarted("hidden", "http", "local")
	call(h, "c-1", "hidden", "shell", "2026-07-28", "ok", time.Millisecond)
	if s := h.Snapshot().Sessions[0]; s.Era != "modern" || s.Version != "2026-07-28" {
		t.Errorf("session = %+v", s)
	}
	if got := testutil.ToFloat64(h.m.sessions.WithLabelValues("http", "modern")); got != 1 {
		t.Errorf("sessions{http,modern} = %v", got)
	}
	if got := testutil.ToFloat64(h.m.sessions.WithLabelValues("http", "pending")); got != 0 {
		t.Errorf("sessions{http,pending} = %v", got)
	}
}

func TestAuditRingKeepsTheLast50(t *testing.T) {
	h := New(Options{})
	for i := range 120 {
		h.CallFinished(nil, &audit.Record{Tool: "shell", Outcome: "ok", CorrelationID: fmt.Sprintf("c-%d", i)})
	}
	a := h.Snapshot().Audit
	if len(a) != 50 || a[0].CorrelationID != "c-119" || a[49].CorrelationID != "c-70" {
		t.Errorf("audit: %d entries, newest %q, oldest %q", len(a), a[0].CorrelationID, a[len(a)-1].CorrelationID)
	}
}

func TestCallFinishedWithoutView(t *testing.T) {
	h := New(Options{})
	h.SetTools(testTools())
	h.CallFinished(nil, &audit.Record{Tool: "shell", Outcome: "cancelled", CorrelationID: "c-9"})
	h.CallFinished(nil, nil)
	h.CallFinished(&actors.CallView{ID: "c-10", Tool: "shell", Version: "2025-06-18"}, nil) // never started here
	h.CallStateChanged(&actors.CallView{ID: "c-11"}, actors.CallRunning)
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("shell", "cancelled", "unknown", "unknown")); got != 1 {
		t.Errorf("calls{shell,cancelled,unknown} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("shell", "other", "legacy", "unknown")); got != 1 {
		t.Errorf("calls{shell,other,legacy} = %v, want 1", got)
	}
	if s := h.Snapshot(); len(s.Calls) != 0 || len(s.Audit) != 1 {
		t.Errorf("snapshot: %+v", s)
	}
}

func TestNilHub(t *testing.T) {
	var h *Hub
	h.SetTools(testTools())
	h.HTTPRefused(401)
	h.SessionStarted("s", "stdio", "local")
	c := &actors.CallView{ID: "c-1"}
	if ctx := h.CallStarted(t0ctx(), c); ctx != t0ctx() {
		t.Error("a nil Hub's CallStarted changed the context")
	}
	h.CallStateChanged(c, actors.CallRunning)
	h.ApprovalDecided(c, "approved", time.Second)
	h.CallFinished(c, &audit.Record{})
	h.SandboxStarted(sandbox.ProfileNone, 0, nil)
	h.DownstreamChanged("x", "ready")
	h.AuditFlushed(1, 0)
	h.RequestServed("s", "ping", time.Now())
	h.SessionEnded("s")
	if h.Registry() != nil {
		t.Error("a nil Hub has a registry")
	}
	b, _ := json.Marshal(h.Snapshot())
	if !strings.Contains(string(b), `"sessions":[]`) {
		t.Errorf("nil Hub snapshot = %s", b)
	}
}

func TestSnapshotJSON(t *testing.T) {
	h := New(Options{Version: "v"})
	h.SetTools(testTools())
	h.SessionStarted("s1", "stdio", "local")
	c := &actors.CallView{ID: "c-1", Session: "s1", Tool: "shell", Started: time.Now()}
	h.CallStarted(t0ctx(), c)
	b, err := json.Marshal(h.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"sessions":[{"id":"s1","transport":"stdio","era":"pending"`, `"calls":[{"id":"c-1","session":"s1","tool":"shell","state":"starting"`,
		`"downstreams":[]`, `"audit":[]`, `"calls_in_flight":1`, `"approvals_pending":0`, `"latency_p99_seconds":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("snapshot JSON lacks %s:\n%s", want, b)
		}
	}
	// The snapshot is a copy.
	s := h.Snapshot()
	s.Calls[0].State = "mutated"
	if h.Snapshot().Calls[0].State != "starting" {
		t.Error("changing a snapshot changed the Hub")
	}
}

func TestRequestServed(t *testing.T) {
	h := New(Options{})
	h.RequestServed("s1", "tools/list", time.Now().Add(-5*time.Millisecond))
	h.RequestServed("s1", "initialize", time.Now())
	if got := testutil.ToFloat64(h.m.requests.WithLabelValues("tools/list")); got != 1 {
		t.Errorf("requests{tools/list} = %v", got)
	}
	if n := histogramCount(t, h, "troupe_request_duration_seconds", map[string]string{"method": "tools/list"}); n != 1 {
		t.Errorf("request_duration{tools/list} count = %d", n)
	}
}

func TestMetricsLint(t *testing.T) {
	h := New(Options{SpoolBytes: func() int64 { return 0 }})
	h.SetTools(testTools())
	h.SessionStarted("s1", "stdio", "local")
	call(h, "c-1", "s1", "shell", "2025-06-18", "ok", time.Millisecond)
	h.HTTPRefused(401)
	h.SandboxStarted(sandbox.ProfileDefault, time.Millisecond, nil)
	h.SandboxStarted(sandbox.ProfileDefault, 0, &sandbox.StartError{Stage: "policy"})
	h.SandboxStarted(sandbox.ProfileDefault, 0, &sandbox.StartError{Stage: "exec"})
	for _, s := range []string{"ready", "failed", "ready"} {
		h.DownstreamChanged("github", s)
	}
	h.AuditFlushed(1, time.Millisecond)
	h.ApprovalDecided(nil, "approved", time.Second)
	h.RequestServed("s1", "ping", time.Now())
	problems, err := testutil.GatherAndLint(h.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "troupe_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	mfs, _ := h.Registry().Gather()
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if strings.HasPrefix(mf.GetName(), "troupe_") && len(mf.GetHelp()) < 20 {
			t.Errorf("%s: help %q says too little", mf.GetName(), mf.GetHelp())
		}
	}
	for _, n := range []string{"troupe_calls_total", "troupe_call_duration_seconds", "troupe_approval_wait_seconds",
		"troupe_sandbox_start_duration_seconds", "troupe_calls_in_flight", "troupe_sessions", "troupe_approvals_total",
		"troupe_sandbox_starts_total", "troupe_sandbox_refusals_total", "troupe_sandbox_start_failures_total",
		"troupe_requests_total", "troupe_request_duration_seconds", "troupe_approvals_pending", "troupe_downstream_state",
		"troupe_downstream_reconnects_total", "troupe_downstream_call_duration_seconds", "troupe_audit_batch_records",
		"troupe_audit_flush_duration_seconds", "troupe_spool_bytes", "troupe_http_refused_total", "troupe_build_info",
		"go_goroutines", "process_cpu_seconds_total"} {
		if !names[n] {
			t.Errorf("no metric %s", n)
		}
	}
}

func TestTwoHubsDoNotCollide(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	a.HTTPRefused(401)
	if got := testutil.ToFloat64(b.m.httpRefused.WithLabelValues("401")); got != 0 {
		t.Errorf("a second Hub saw the first's refusal: %v", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	h := New(Options{SpoolBytes: func() int64 { return 1 }})
	h.SetTools(testTools())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			session := fmt.Sprintf("s%d", g)
			h.SessionStarted(session, "http", "local")
			h.SessionInitialized(session, "2025-06-18", "c")
			for i := range 200 {
				id := fmt.Sprintf("c-%d-%d", g, i)
				c := &actors.CallView{ID: id, Session: session, Tool: "shell", Version: "2025-06-18", Started: time.Now()}
				h.CallStarted(t0ctx(), c)
				h.CallStateChanged(c, actors.CallWaitingApproval)
				h.ApprovalDecided(c, "approved", time.Millisecond)
				h.CallStateChanged(c, actors.CallRunning)
				h.CallFinished(c, &audit.Record{Tool: "shell", Outcome: "ok", CorrelationID: id, Session: session})
				h.DownstreamChanged("github", []string{"ready", "failed"}[i%2])
				if i%50 == 0 {
					h.SetTools(testTools())
				}
			}
			h.SessionEnded(session)
		})
	}
	wg.Go(func() {
		for range 50 {
			_ = h.Snapshot()
			if _, err := h.Registry().Gather(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	s := h.Snapshot()
	if s.Metrics.CallsTotal != 1600 || s.Metrics.CallsInFlight != 0 || s.Metrics.ApprovalsPending != 0 || s.Metrics.Sessions != 0 {
		t.Errorf("after all: %+v", s.Metrics)
	}
	if got := testutil.ToFloat64(h.m.sessions.WithLabelValues("http", "legacy")); got != 0 {
		t.Errorf("sessions{http,legacy} = %v", got)
	}
}

func TestQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, c := range []struct {
		q     float64
		cum   []uint64
		total uint64
		want  float64
	}{
		{0.5, []uint64{0, 0, 0}, 0, 0},
		{0.5, []uint64{10, 10, 10}, 10, 0.5},
		{0.5, []uint64{0, 10, 10}, 10, 1.5},
		{0.99, []uint64{0, 0, 5}, 10, 4}, // the overflow bucket: the highest bound
	} {
		if got := quantile(c.q, bounds, c.cum, c.total); got != c.want {
			t.Errorf("quantile(%v, %v, %d) = %v, want %v", c.q, c.cum, c.total, got, c.want)
		}
	}
}

// Refusals by an identity's limits are counted by its bounded label and
// the kind of limit; an OAuth subject or an unknown limit never becomes a
// label value.
func TestRateLimitedByIdentity(t *testing.T) {
	h := New(Options{})
	h.RateLimited(&limits.Exceeded{Identity: "token:alice", Limit: limits.LimitCallsPerMinute})
	h.RateLimited(&limits.Exceeded{Identity: "token:alice", Limit: limits.LimitCallsPerMinute})
	h.RateLimited(&limits.Exceeded{Identity: "oauth:subject-42", Limit: limits.LimitSessions})
	h.RateLimited(&limits.Exceeded{Identity: "local", Limit: "made up"})
	h.RateLimited(nil)
	for _, c := range []struct {
		who, limit string
		want       float64
	}{{"token:alice", "calls_per_minute", 2}, {"oauth", "max_sessions", 1}, {"local", "other", 1}} {
		if got := testutil.ToFloat64(h.m.rateLimited.WithLabelValues(c.who, c.limit)); got != c.want {
			t.Errorf("rate_limited{%s,%s} = %v, want %v", c.who, c.limit, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(h.m.rateLimited, "troupe_rate_limited_total"); n != 3 {
		t.Errorf("rate_limited_total has %d series, want 3", n)
	}
}

// The held downstream tools reach the Snapshot from Options.Held, their
// names clipped like every other name a server chose; without the option
// the list is empty, never null.
func TestSnapshotHeld(t *testing.T) {
	if b, _ := json.Marshal(New(Options{}).Snapshot()); !strings.Contains(string(b), `"held":[]`) {
		t.Fatalf("no held list: %s", b)
	}
	since := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	h := New(Options{Held: func() []HeldInfo {
		return []HeldInfo{{Server: "acme", Kind: "tool", Name: strings.Repeat("n", 1000), Since: since,
			Summary: "description changed", Diff: []string{"description:", "+ x"}, Hash: "h"}}
	}})
	held := h.Snapshot().Held
	if len(held) != 1 || held[0].Server != "acme" || held[0].Hash != "h" || len(held[0].Name) > 256+len("…") || len(held[0].Diff) != 2 {
		t.Fatalf("held = %+v", held)
	}
}
