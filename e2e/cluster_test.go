package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestClusterRoutesSessionsThroughEveryNode: sessions initialized on each
// of three nodes are used through every node (the owner and the two
// others), with plain answers and a streamed command tool's progress.
func TestClusterRoutesSessionsThroughEveryNode(t *testing.T) {
	c := newTestCluster(t, `
[mcp.count]
description = "Counts to three, one line at a time."
command = "sh"
args = ["-c", "for i in 1 2 3; do echo line $i; sleep 0.1; done"]
side_effects = []
requires_approval = false
streaming = true
`)
	nodes := []*clusterNode{c.startNode(), c.startNode(), c.startNode()}
	id := 1
	for _, owner := range nodes {
		sid := owner.initialize(t)
		for _, front := range nodes {
			id++
			r := front.post(t, sid, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/list"})
			if r.status != http.StatusOK || r.last()["result"] == nil {
				t.Fatalf("tools/list of a session of %s through %s: %d %v", owner.http, front.http, r.status, r.messages)
			}
			id++
			r = front.post(t, sid, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
				"name": "count", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": fmt.Sprint("p", id)}}})
			text := fmt.Sprint(r.last()["result"])
			if r.status != http.StatusOK || !strings.Contains(text, "line 3") {
				t.Fatalf("tools/call of a session of %s through %s: %d %v", owner.http, front.http, r.status, r.messages)
			}
			progress := 0
			for _, m := range r.messages {
				if m["method"] == "notifications/progress" {
					progress++
				}
			}
			if progress == 0 {
				t.Fatalf("tools/call of a session of %s through %s streamed no progress: %v", owner.http, front.http, r.messages)
			}
		}
	}
}
