package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
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
