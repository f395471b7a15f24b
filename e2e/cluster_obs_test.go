package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// What operators see of a cluster: the audit log of each node, its
// metrics and its status page. The nodes run a troupe built without -race
// (cluster_harness_test.go says why).

// clusterHelloTool is a command tool that answers at once, for calls that leave
// audit records and move the metrics.
const clusterHelloTool = `
[mcp.hello]
command = "echo"
args = ["hello"]
requires_approval = false
side_effects = []
description = "Says hello."
`

// callHello calls hello in session sid through node n.
func callHello(t *testing.T, n *clusterNode, sid string, id int) {
	t.Helper()
	r := n.post(t, sid, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "hello", "arguments": map[string]any{}}})
	if r.status != http.StatusOK || !strings.Contains(fmt.Sprint(r.last()["result"]), "hello") {
		t.Fatalf("calling hello through %s: %d %v", n.http, r.status, r.messages)
	}
}

// TestClusterAuditLogPerNode: two nodes sharing one config and its
// audit.path write two files, each named by its node's address, each an
// intact chain of that node's calls; "troupe audit verify" checks a file
// given by name, and with the node's own config (its cluster.listen) finds
// that node's file.
func TestClusterAuditLogPerNode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	c := newTestCluster(t, clusterHelloTool+fmt.Sprintf("\n[audit]\npath = %q\n", path))
	a, b := c.startNode(), c.startNode()
	// Sessions of each node, each called through both fronts: a call is
	// recorded by the node that runs it, its session's owner.
	sa, sb := a.initialize(t), b.initialize(t)
	callHello(t, a, sa, 1)
	callHello(t, b, sa, 2)
	callHello(t, b, sb, 3)
	a.stop(t)
	b.stop(t)

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	nodeFile := func(n *clusterNode) string {
		return "audit." + strings.ReplaceAll(n.remote, ":", "_") + ".jsonl"
	}
	want := []string{nodeFile(a), nodeFile(b)}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("the audit directory holds %q, want one file per node %q", names, want)
	}
	records := regexp.MustCompile(`: (\d+) records, chain intact`)
	for n, calls := range map[*clusterNode]string{a: "2", b: "1"} {
		file := filepath.Join(dir, nodeFile(n))
		out, err := exec.Command(clusterBinary(t), "audit", "verify", file).CombinedOutput()
		if m := records.FindStringSubmatch(string(out)); err != nil || m == nil || m[1] != calls {
			t.Errorf("troupe audit verify %s: %v\n%s\nwant %s records, chain intact", file, err, out, calls)
		}
		// With the node's config, the file is the node's own.
		out, err = exec.Command(clusterBinary(t), "audit", "verify", "--config", c.config,
			"-c", "cluster.listen="+fmt.Sprintf("%q", n.remote)).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), file+": "+calls+" records") {
			t.Errorf("troupe audit verify with node %s's config: %v\n%s\nwant %s checked", n.remote, err, out, file)
		}
	}
}

// get fetches one of node n's operators' paths with the bearer token.
func (n *clusterNode) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+n.http+path, nil)
	req.Header.Set("Authorization", "Bearer "+n.c.token)
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s of %s: %v", path, n.http, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// clusterStatus is the part of a node's /status/ JSON these tests read.
type clusterStatus struct {
	Cluster *struct {
		Node    string `json:"node"`
		Ready   bool   `json:"ready"`
		Members []struct {
			ID         string  `json:"id"`
			Address    string  `json:"address"`
			Self       bool    `json:"self"`
			RTTSeconds float64 `json:"rtt_seconds"`
		} `json:"members"`
	} `json:"cluster"`
	Sessions []struct {
		ID    string `json:"id"`
		Owner string `json:"owner"`
	} `json:"sessions"`
}

// waitClusterStatus polls node n's /status/ until ok accepts it.
func waitClusterStatus(t *testing.T, n *clusterNode, what string, ok func(clusterStatus) bool) clusterStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := n.get(t, "/status/")
		var s clusterStatus
		if code == http.StatusOK && json.Unmarshal(body, &s) == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's /status/ never showed %s: %d %s", n.http, what, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// memberOf is the member id a clustered session id names ("<32 hex>.<member>").
func memberOf(t *testing.T, sid string) string {
	t.Helper()
	_, member, ok := strings.Cut(sid, ".")
	if !ok || member == "" {
		t.Fatalf("session id %q names no member", sid)
	}
	return member
}

// TestClusterStatusAndMetricsShowTheNodes: on each of two nodes, /status/
// names the node, its readiness, both members with their addresses and a
// measured round trip to the other, and the node as the owner of its
// session; the page in headless Chromium shows the same; /metrics labels
// every troupe_* series with the node's member id (the call counted there
// too) and adds the members gauge and the round trip to the other member.
func TestClusterStatusAndMetricsShowTheNodes(t *testing.T) {
	chromium := findChromium(t)
	c := newTestCluster(t, clusterHelloTool)
	nodes := []*clusterNode{c.startNode(), c.startNode()}
	ids := map[*clusterNode]string{}
	for i, n := range nodes {
		sid := n.initialize(t)
		ids[n] = memberOf(t, sid)
		callHello(t, nodes[1-i], sid, 1) // through the other node: counted by the owner
	}
	for i, n := range nodes {
		self, other := ids[n], ids[nodes[1-i]]
		s := waitClusterStatus(t, n, "both members with the round trip to the other", func(s clusterStatus) bool {
			if s.Cluster == nil || len(s.Cluster.Members) != 2 {
				return false
			}
			for _, m := range s.Cluster.Members {
				if m.ID == other && m.RTTSeconds <= 0 {
					return false
				}
			}
			return true
		})
		if s.Cluster.Node != self || !s.Cluster.Ready {
			t.Errorf("%s's cluster: node %q ready %v, want %q ready", n.http, s.Cluster.Node, s.Cluster.Ready, self)
		}
		for _, m := range s.Cluster.Members {
			want := map[string]*clusterNode{self: n, other: nodes[1-i]}[m.ID]
			if want == nil || m.Address != want.remote || m.Self != (m.ID == self) {
				t.Errorf("%s shows member %+v; want %s at %s and %s at %s", n.http, m, self, n.remote, other, nodes[1-i].remote)
			}
		}
		if len(s.Sessions) != 1 || s.Sessions[0].Owner != self {
			t.Errorf("%s's sessions %+v: want its one session owned by %s", n.http, s.Sessions, self)
		}

		dom := dumpDOM(t, chromium, "http://"+n.http+"/status?token="+c.token)
		for _, want := range []string{
			`id="cluster"`, `data-node="` + self + `" data-ready="true"`, ">ready<",
			`data-member="` + self + `" data-self="true"`, ">this node<", ">" + n.remote + "<",
			`data-member="` + other + `" data-self="false"`, ">" + nodes[1-i].remote + "<",
			`data-col="owner">` + self + "<",
		} {
			if !strings.Contains(dom, want) {
				t.Errorf("%s's page in Chromium lacks %s", n.http, want)
			}
		}
		row, _, _ := strings.Cut(dom[strings.Index(dom, `data-member="`+other+`"`)+1:], "</tr>")
		if !regexp.MustCompile(`data-col="rtt">[0-9.]+ m?s<`).MatchString(row) {
			t.Errorf("%s's page shows no round trip to %s: %s", n.http, other, row)
		}
		if t.Failed() {
			t.Logf("%s's page:\n%s", n.http, dom)
		}

		code, body := n.get(t, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("%s's /metrics: %d %s", n.http, code, body)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("%s's /metrics is not Prometheus' text format: %v", n.http, err)
		}
		for name, f := range families {
			if !strings.HasPrefix(name, "troupe_") {
				continue
			}
			for _, m := range f.GetMetric() {
				node := ""
				for _, l := range m.GetLabel() {
					if l.GetName() == "node" {
						node = l.GetValue()
					}
				}
				if node != self {
					t.Errorf("%s's %s%v: node label %q, want %q", n.http, name, m.GetLabel(), node, self)
				}
			}
		}
		if got := counter(families, "troupe_calls_total", map[string]string{"node": self, "tool": "hello", "outcome": "ok", "era": "legacy", "identity": "token:default"}); got != 1 {
			t.Errorf("%s's troupe_calls_total{node=%s,tool=hello}: %v, want 1", n.http, self, got)
		}
		if got := counter(families, "troupe_cluster_members", map[string]string{"node": self}); got != 2 {
			t.Errorf("%s's troupe_cluster_members: %v, want 2", n.http, got)
		}
		if got := counter(families, "troupe_cluster_rtt_seconds", map[string]string{"node": self, "member": other}); got <= 0 || got > 1 {
			t.Errorf("%s's troupe_cluster_rtt_seconds{member=%s}: %v, want a measured round trip", n.http, other, got)
		}
	}
}
