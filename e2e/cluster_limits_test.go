package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestClusterRateLimitHoldsForTheCluster: with calls_per_minute = N and
// two nodes, N calls of one identity spread over both nodes (each through
// a session the node owns) succeed, and the next one, on either node, is
// rate limited: the identity's bucket has one owner in the cluster, which
// the other node asks, so the limit is N for the cluster, not N per node.
func TestClusterRateLimitHoldsForTheCluster(t *testing.T) {
	const perMinute = 4
	c := newTestCluster(t, fmt.Sprintf(`
[limits.rate]
calls_per_minute = %d

[mcp.hello]
description = "Says hello."
command = "echo"
args = ["hello"]
side_effects = []
requires_approval = false
`, perMinute))
	a, b := c.startNode(), c.startNode()
	sa, sb := a.initialize(t), b.initialize(t)
	id := 100
	call := func(n *clusterNode, sid string) mcpReply {
		id++
		return n.post(t, sid, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": "hello", "arguments": map[string]any{}}})
	}
	for i := range perMinute {
		n, sid := a, sa
		if i%2 == 1 {
			n, sid = b, sb
		}
		r := call(n, sid)
		if r.status != http.StatusOK || !strings.Contains(fmt.Sprint(r.last()["result"]), "hello") {
			t.Fatalf("call %d of %d (on %s) was refused: %d %v", i+1, perMinute, n.http, r.status, r.messages)
		}
	}
	for _, n := range []struct {
		node *clusterNode
		sid  string
	}{{a, sa}, {b, sb}} {
		r := call(n.node, n.sid)
		e, _ := r.last()["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if e == nil || e["code"] != float64(-31429) || data["kind"] != "rate_limited" {
			t.Fatalf("call %d in a minute (on %s) was not rate limited: %d %v", perMinute+1, n.node.http, r.status, r.messages)
		}
		if s, _ := data["retryAfterSeconds"].(float64); s <= 0 {
			t.Fatalf("rate limited without retryAfterSeconds: %v", e)
		}
	}
	// Neither node decided alone: each asked the bucket's owner.
	for _, n := range []*clusterNode{a, b} {
		if strings.Contains(n.log.String(), "a limit's owner did not answer") {
			t.Fatalf("node %s decided without the bucket's owner; its log:\n%s", n.http, n.log)
		}
	}
}
