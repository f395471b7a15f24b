package observe

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// TestSetClusterLabelsEverySeriesByNode: once the Hub knows its node,
// every troupe_* series carries node=<member id>, with the counts made
// before (the same counters), the Go and process series stay as they
// were, and the cluster's gauges appear: the members and the last round
// trip to each other member (none for a member not measured yet, nor for
// this node). The metrics stay lint-clean.
func TestSetClusterLabelsEverySeriesByNode(t *testing.T) {
	h := New(Options{Version: "test"})
	h.SetTools(testTools())
	h.HTTPRefused(401)
	if strings.Contains(gatherText(t, h), `node="`) {
		t.Fatal("one process: a series has a node label")
	}
	var members atomic.Pointer[ClusterInfo]
	members.Store(&ClusterInfo{Ready: true, Members: []MemberInfo{
		{ID: "nodeA", Address: "127.0.0.1:7001", Self: true},
		{ID: "nodeB", Address: "127.0.0.1:7002", RTTSeconds: 0.0005},
		{ID: "nodeC", Address: "127.0.0.1:7003"},
	}})
	h.SetCluster(Cluster{Node: "nodeA", Status: func() ClusterInfo { return *members.Load() }})
	h.HTTPRefused(401)

	text := gatherText(t, h)
	for _, want := range []string{
		`troupe_http_refused_total{node="nodeA",status="401"} 2`,
		`troupe_build_info{node="nodeA",version="test"} 1`,
		`troupe_calls_in_flight{node="nodeA"} 0`,
		`troupe_cluster_members{node="nodeA"} 3`,
		`troupe_cluster_rtt_seconds{member="nodeB",node="nodeA"} 0.0005`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "troupe_") && !strings.Contains(line, `node="nodeA"`):
			t.Errorf("a troupe series without the node label: %s", line)
		case (strings.HasPrefix(line, "go_") || strings.HasPrefix(line, "process_")) && strings.Contains(line, "node="):
			t.Errorf("a runtime series with the node label: %s", line)
		case strings.Contains(line, `member="nodeA"`) || strings.Contains(line, `member="nodeC"`):
			t.Errorf("a round trip for this node or one not measured: %s", line)
		}
	}
	// A member that left leaves no series.
	members.Store(&ClusterInfo{Ready: true, Members: []MemberInfo{{ID: "nodeA", Address: "127.0.0.1:7001", Self: true}}})
	if text := gatherText(t, h); strings.Contains(text, `member="nodeB"`) || !strings.Contains(text, `troupe_cluster_members{node="nodeA"} 1`) {
		t.Errorf("after nodeB left:\n%s", text)
	}
	problems, err := testutil.GatherAndLint(h.Registry())
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}

// TestSnapshotShowsTheCluster: one process's snapshot has no cluster (and
// its JSON no "cluster" key, its sessions no owner); a node's names the
// node, its readiness, the members with their round trips, and the owner
// of each session.
func TestSnapshotShowsTheCluster(t *testing.T) {
	h := New(Options{})
	h.SessionStarted("s-1", "http", "local")
	body, _ := json.Marshal(h.Snapshot())
	if s := string(body); strings.Contains(s, `"cluster"`) || strings.Contains(s, `"owner"`) {
		t.Fatalf("one process's snapshot speaks of a cluster: %s", s)
	}
	h.SetCluster(Cluster{Node: "nodeA", Status: func() ClusterInfo {
		return ClusterInfo{Node: "nodeA", Members: []MemberInfo{
			{ID: "nodeA", Address: "127.0.0.1:7001", Self: true}, {ID: "nodeB", Address: "127.0.0.1:7002", RTTSeconds: 0.001}}}
	}})
	s := h.Snapshot()
	if s.Cluster == nil || s.Cluster.Node != "nodeA" || s.Cluster.Ready || len(s.Cluster.Members) != 2 ||
		s.Cluster.Members[1].RTTSeconds != 0.001 {
		t.Fatalf("the snapshot's cluster: %+v", s.Cluster)
	}
	if len(s.Sessions) != 1 || s.Sessions[0].Owner != "nodeA" {
		t.Fatalf("the snapshot's sessions: %+v, want the node as owner", s.Sessions)
	}
	body, _ = json.Marshal(s)
	for _, want := range []string{`"cluster":{"node":"nodeA","ready":false,"members":[`, `"rtt_seconds":0.001`, `"owner":"nodeA"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the JSON lacks %s: %s", want, body)
		}
	}
}

// gatherText is the Hub's metrics in Prometheus' text format.
func gatherText(t *testing.T, h *Hub) string {
	t.Helper()
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
