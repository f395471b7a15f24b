package observe

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A tenant's view holds its own sessions, calls and audit entries, and
// nothing of the others' nor any server-wide number, downstream server or
// cluster member.
func TestTenantViewShowsOnlyItsOwn(t *testing.T) {
	now := time.Now()
	full := Snapshot{
		Version: "v1", Time: now, UptimeSeconds: 10,
		Sessions: []SessionInfo{
			{ID: "s-alice", Identity: "token:alice", Owner: "node-a"},
			{ID: "s-bob", Identity: "token:bob", Owner: "node-a"},
			{ID: "s-sub", Identity: "oauth:alice"}, // another namespace, same name
		},
		Calls: []CallInfo{
			{ID: "c-1", Session: "s-alice", Identity: "token:alice", State: "waiting_approval"},
			{ID: "c-2", Session: "s-bob", Identity: "token:bob", State: "running"},
		},
		Audit: []AuditEntry{
			{CorrelationID: "c-0", Identity: "token:bob", Tool: "shell"},
			{CorrelationID: "c-9", Identity: "token:alice", Tool: "read_file"},
		},
		Downstreams: []DownstreamStatus{{Name: "github", State: "ready", Tools: 3}},
		History:     []HistoryPoint{{Calls: 5}},
		Metrics: MetricsSummary{CallsTotal: 40, CallsFailed: 2, CallsInFlight: 2, Sessions: 3, ApprovalsPending: 1,
			LatencyP50Seconds: 1, LatencyCalls: 40, HTTPRefusedTotal: 7, SpoolBytes: 1 << 20},
		Cluster:     &ClusterInfo{Node: "node-a"},
		Held:        []HeldInfo{{Server: "github", Kind: "tool", Name: "rugpull", Hash: "h1"}},
		AcceptToken: "csrf-secret",
	}
	got := TenantView(full, "token:alice")
	if len(got.Sessions) != 1 || got.Sessions[0].ID != "s-alice" || got.Sessions[0].Owner != "" {
		t.Errorf("sessions = %+v, want alice's only, without its cluster owner", got.Sessions)
	}
	if len(got.Calls) != 1 || got.Calls[0].ID != "c-1" {
		t.Errorf("calls = %+v, want c-1 only", got.Calls)
	}
	if len(got.Audit) != 1 || got.Audit[0].CorrelationID != "c-9" {
		t.Errorf("audit = %+v, want c-9 only", got.Audit)
	}
	want := MetricsSummary{Sessions: 1, CallsInFlight: 1, ApprovalsPending: 1, SpoolBytes: -1}
	if got.Metrics != want {
		t.Errorf("metrics = %+v, want %+v (hers, no server-wide totals)", got.Metrics, want)
	}
	if got.Cluster != nil || len(got.Downstreams) != 0 || len(got.History) != 0 || len(got.Held) != 0 || got.AcceptToken != "" {
		t.Errorf("cluster %v, downstreams %v, history %v, held %v, token %q: want none", got.Cluster, got.Downstreams, got.History, got.Held, got.AcceptToken)
	}
	if got.Viewer != "token:alice" || got.Version != "v1" {
		t.Errorf("viewer %q version %q", got.Viewer, got.Version)
	}
	body, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"bob", "s-sub", "node-a", "github", "c-0", "c-2", "rugpull", "csrf-secret"} {
		if strings.Contains(string(body), other) {
			t.Errorf("the tenant's JSON names %q: %s", other, body)
		}
	}
	// The full snapshot is untouched.
	if len(full.Sessions) != 3 || full.Sessions[0].Owner != "node-a" {
		t.Errorf("TenantView changed its input: %+v", full.Sessions)
	}
	// Slices encode as [] for a tenant with nothing.
	none, _ := json.Marshal(TenantView(full, "token:carol"))
	if !strings.Contains(string(none), `"sessions":[]`) || !strings.Contains(string(none), `"downstreams":[]`) ||
		!strings.Contains(string(none), `"held":[]`) {
		t.Errorf("empty view: %s", none)
	}
}
