package mcphttp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"troupe/auth"
	"troupe/observe"
	"troupe/observe/status"
)

// twoTenants is a status Source with one session, call and audit entry
// each of alice and bob, a downstream server and a cluster.
type twoTenants struct{ reg *prometheus.Registry }

func (s twoTenants) Registry() *prometheus.Registry { return s.reg }

func (twoTenants) Snapshot() observe.Snapshot {
	return observe.Snapshot{
		Time: time.Now(),
		Sessions: []observe.SessionInfo{
			{ID: "s-alice", Identity: "token:alice", Owner: "node-1"},
			{ID: "s-bob", Identity: "token:bob", Owner: "node-1"},
		},
		Calls: []observe.CallInfo{
			{ID: "c-alice", Session: "s-alice", Identity: "token:alice", Tool: "shell", State: "running"},
			{ID: "c-bob", Session: "s-bob", Identity: "token:bob", Tool: "shell", State: "running"},
		},
		Audit: []observe.AuditEntry{
			{CorrelationID: "c-a0", Session: "s-alice", Identity: "token:alice", Tool: "shell", Outcome: "ok"},
			{CorrelationID: "c-b0", Session: "s-bob", Identity: "token:bob", Tool: "shell", Outcome: "ok"},
		},
		Downstreams: []observe.DownstreamStatus{{Name: "github", State: "ready"}},
		History:     []observe.HistoryPoint{{Calls: 9}},
		Metrics:     observe.MetricsSummary{CallsTotal: 9, Sessions: 2, CallsInFlight: 2},
		Cluster:     &observe.ClusterInfo{Node: "node-1"},
	}
}

// newTenantsRig is an adminRig serving the real status handler over
// twoTenants, with the operator "ops" and the tenants alice and bob.
func newTenantsRig() *adminRig {
	a := &adminRig{}
	a.h = New(nil, Options{CheckHost: true, Admin: status.New(twoTenants{prometheus.NewRegistry()}, status.Options{}),
		Logger: testLogger(), OnRefused: func(int) {}})
	a.h.SetAuth(&auth.Chain{Tokens: auth.NewTokens([]auth.StaticToken{
		{Name: "ops", Token: "ops-token", Operator: true},
		{Name: "alice", Token: "alice-token"},
		{Name: "bob", Token: "bob-token"},
	})})
	return a
}

// decodeStatus reads /status/'s JSON.
func decodeStatus(t *testing.T, body string) observe.Snapshot {
	t.Helper()
	var s observe.Snapshot
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("status JSON: %v: %s", err, body)
	}
	return s
}

// With operators named, /metrics serves only them: a tenant's valid token
// gets 403 there. The status page and its JSON serve a tenant its own
// view: its session, call and audit entry, none of the other tenant's,
// no downstream server, cluster or server-wide total; the operator sees
// everyone. A tenant's /status?token= login works, and its cookie only
// ever shows its own view.
func TestTenantSeesItsOwnStatus(t *testing.T) {
	a := newTenantsRig()
	if w := a.do("GET", "/metrics", "Authorization", "Bearer alice-token"); w.Code != http.StatusForbidden {
		t.Errorf("GET /metrics as a tenant: %d, want 403", w.Code)
	}
	if w := a.do("GET", "/metrics", "Authorization", "Bearer ops-token"); w.Code != 200 {
		t.Errorf("GET /metrics as the operator: %d", w.Code)
	}
	if w := a.do("GET", "/status", "Authorization", "Bearer alice-token"); w.Code != 200 ||
		!strings.Contains(w.Body.String(), "<html") {
		t.Errorf("GET /status as a tenant: %d", w.Code)
	}
	checkAlice := func(how string, code int, body string) {
		t.Helper()
		if code != 200 {
			t.Fatalf("%s: %d %s", how, code, body)
		}
		s := decodeStatus(t, body)
		if len(s.Sessions) != 1 || s.Sessions[0].ID != "s-alice" || len(s.Calls) != 1 || s.Calls[0].ID != "c-alice" ||
			len(s.Audit) != 1 || s.Audit[0].CorrelationID != "c-a0" || s.Viewer != "token:alice" {
			t.Errorf("%s: %s, want alice's own", how, body)
		}
		for _, other := range []string{"bob", "github", "node-1"} {
			if strings.Contains(body, other) {
				t.Errorf("%s names %q: %s", how, other, body)
			}
		}
	}
	w := a.do("GET", "/status/", "Authorization", "Bearer alice-token")
	checkAlice("alice's bearer", w.Code, w.Body.String())

	c := a.login(t, "alice-token")
	w = a.do("GET", "/status/", "Cookie", c.Name+"="+c.Value)
	checkAlice("alice's cookie", w.Code, w.Body.String())
	if w := a.do("GET", "/metrics", "Cookie", c.Name+"="+c.Value); w.Code == 200 {
		t.Errorf("GET /metrics with a tenant's cookie: %d", w.Code)
	}

	w = a.do("GET", "/status/", "Authorization", "Bearer ops-token")
	s := decodeStatus(t, w.Body.String())
	if len(s.Sessions) != 2 || len(s.Calls) != 2 || len(s.Audit) != 2 || s.Viewer != "" || s.Cluster == nil {
		t.Errorf("the operator's view: %s, want everyone", w.Body.String())
	}
	// An operator's login of a token that a reload makes a tenant's shows
	// that tenant's own view from then on.
	c = a.login(t, "ops-token")
	a.h.SetAuth(&auth.Chain{Tokens: auth.NewTokens([]auth.StaticToken{{Name: "ops", Token: "ops-token"}})})
	w = a.do("GET", "/status/", "Cookie", c.Name+"="+c.Value)
	if s := decodeStatus(t, w.Body.String()); w.Code != 200 || len(s.Sessions) != 0 || s.Viewer != "token:ops" {
		t.Errorf("a login of an identity no longer an operator: %d %s, want its own (empty) view", w.Code, w.Body.String())
	}
	// The same token under another name: the login carried the identity,
	// so it ends.
	a.h.SetAuth(&auth.Chain{Tokens: auth.NewTokens([]auth.StaticToken{{Name: "renamed", Token: "ops-token", Operator: true}})})
	if w := a.do("GET", "/status/", "Cookie", c.Name+"="+c.Value); w.Code != http.StatusUnauthorized {
		t.Errorf("a login after its token was renamed: %d, want 401", w.Code)
	}
}
