package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClusterRateLimitHoldsForTheCluster: with calls_per_minute = N and
// two nodes, N calls of one identity spread over both nodes (each through
// a session the node owns) succeed, and the next one, on either node, is
// rate limited: the identity's bucket has one owner in the cluster, which
// the other node asks, so the limit is N for the cluster, not N per node.
// Likewise max_sessions = 2 counts the sessions of both nodes, and a
// session ended on one node frees its slot for an initialize on the other.
func TestClusterRateLimitHoldsForTheCluster(t *testing.T) {
	const perMinute = 4
	c := newTestCluster(t, fmt.Sprintf(`
[limits.rate]
calls_per_minute = %d

[limits.identity]
max_sessions = 2

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

	// Two sessions (one per node) of two: a third is refused on either node.
	for _, n := range []*clusterNode{a, b} {
		status, body, err := n.status(http.MethodPost, "", initializeMsg())
		if err != nil || status != http.StatusTooManyRequests || !strings.Contains(body, "-31429") {
			t.Fatalf("a third session of max_sessions = 2 on %s: %d %s %v", n.http, status, body, err)
		}
	}
	// b's session ends: its slot is free for a session on a.
	if status, body, err := b.status(http.MethodDelete, sb, nil); err != nil || status != http.StatusNoContent {
		t.Fatalf("DELETE of b's session: %d %s %v", status, body, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, body, err := a.status(http.MethodPost, "", initializeMsg())
		if err == nil && status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot of the session that ended on b was not free on a: %d %s %v", status, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body, _ := b.status(http.MethodPost, "", initializeMsg()); status != http.StatusTooManyRequests {
		t.Fatalf("a third session after a took the free slot, on b: %d %s", status, body)
	}

	// Neither node decided alone: each asked the bucket's owner.
	for _, n := range []*clusterNode{a, b} {
		if strings.Contains(n.log.String(), "a limit's owner did not answer") {
			t.Fatalf("node %s decided without the bucket's owner; its log:\n%s", n.http, n.log)
		}
	}
}

// initializeMsg is an initialize request of the 2025-06-18 revision.
func initializeMsg() map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "cluster-e2e", "version": "1"}}}
}
