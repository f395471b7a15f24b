package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// markerLines counts the lines of the marker file (0 when it is not there).
func markerLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestClusterStatelessApprovalRunsOnce: a 2026-07-28 approval round across
// three nodes. The first request reaches node A (input_required: A seals
// the state and names itself in it); the retry with the person's "once"
// reaches node B, which forwards it to A, and the command runs once; the
// same retry replayed on node C is refused (A, the only node that can
// redeem the state, has used it) and the command does not run again: the
// marker file keeps one line. Then a state of a node that has died is
// refused on a survivor with a JSON-RPC error saying the round must start
// again. Before states named their node, B ran the call itself and C ran
// it a second time (each process remembered only its own uses).
func TestClusterStatelessApprovalRunsOnce(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "marker")
	c := newTestCluster(t, fmt.Sprintf(`
[mcp.mark]
description = "Appends a line to the marker file."
command = "sh"
args = ["-c", "echo ran >> %s; echo marked"]
sandbox_profile = "none"
side_effects = ["filesystem"]
requires_approval = true
`, marker))
	a, b, cn := c.startNode(), c.startNode(), c.startNode()

	call := func(id int, extra string) string {
		return modernRequest(fmt.Sprint(id), "tools/call", `"name":"mark","arguments":{}`+extra)
	}
	status, m := a.statelessSend(t, "tools/call", "mark", call(1, ""))
	if status != http.StatusOK {
		t.Fatalf("first round on A: %d %v", status, m)
	}
	state := inputRequiredState(t, m, false)
	if n := markerLines(t, marker); n != 0 {
		t.Fatalf("the command ran before it was approved: %d lines", n)
	}

	retry := call(2, mrtrRetry(state, "once"))
	status, m = b.statelessSend(t, "tools/call", "mark", retry)
	if status != http.StatusOK || !strings.Contains(resultText(t, m), "marked") {
		t.Fatalf("the retry on B: %d %v", status, m)
	}
	if n := markerLines(t, marker); n != 1 {
		t.Fatalf("after the approved retry the marker has %d lines, want 1", n)
	}

	status, m = cn.statelessSend(t, "tools/call", "mark", retry)
	if status != http.StatusOK {
		t.Fatalf("the replay on C: status %d %v", status, m)
	}
	assertStateRefused(t, m, "already used")
	// Nothing runs after the refusal; give a wrongly started run time to
	// show.
	time.Sleep(300 * time.Millisecond)
	if n := markerLines(t, marker); n != 1 {
		t.Fatalf("after the replay on C the marker has %d lines, want 1", n)
	}

	// A state whose node has left: the round must start again.
	_, m = a.statelessSend(t, "tools/call", "mark", call(3, ""))
	state = inputRequiredState(t, m, false)
	a.kill9()
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, m = b.statelessSend(t, "tools/call", "mark", call(4, mrtrRetry(state, "once")))
		if e, ok := m["error"].(map[string]any); ok && e["code"] == float64(-32602) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a retry whose node was killed: %d %v", status, m)
		}
		time.Sleep(200 * time.Millisecond)
	}
	assertStateRefused(t, m, "left the cluster")
	if !strings.Contains(fmt.Sprint(m["error"]), "without requestState") {
		t.Fatalf("the refusal does not say how to start again: %v", m)
	}
	if n := markerLines(t, marker); n != 1 {
		t.Fatalf("the marker has %d lines, want 1", n)
	}
}
