package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// outputLink is the troupe://output/… link of a tools/call answer's
// stdout.
func outputLink(t *testing.T, m map[string]any) string {
	t.Helper()
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	for _, c := range content {
		if cm, _ := c.(map[string]any); cm["type"] == "resource_link" {
			if uri, _ := cm["uri"].(string); strings.HasPrefix(uri, "troupe://output/") && strings.HasSuffix(uri, "/stdout") {
				return uri
			}
		}
	}
	t.Fatalf("no output link in %v", m)
	return ""
}

// readContents is the text of a resources/read answer.
func readContents(t *testing.T, what string, m map[string]any) string {
	t.Helper()
	res, _ := m["result"].(map[string]any)
	contents, _ := res["contents"].([]any)
	if len(contents) != 1 {
		t.Fatalf("%s: %v", what, m)
	}
	text, _ := contents[0].(map[string]any)["text"].(string)
	return text
}

// countTo is what `seq 1 n` prints.
func countTo(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintln(&b, i)
	}
	return b.String()
}

// TestClusterOutputLinkReadThroughAnotherNode: a 2026-07-28 call on node A
// prints more than a result shows; its output stays on A, and its link
// names A, so a resources/read of it through node B is sent to A and
// returns the whole output. Once A is killed (-9), the read through B gets
// an error saying the node that kept the output has left. A session's
// links need no node in their name (every request of the session reaches
// its owner): one read through B is served by A too. Before links named
// their node, B looked in its own stores and answered "not found".
func TestClusterOutputLinkReadThroughAnotherNode(t *testing.T) {
	const lines = 20000 // 108,894 bytes, far more than the 1 KiB head and tail
	c := newTestCluster(t, fmt.Sprintf(`
[output]
inline_bytes = 1024

[mcp.count]
description = "Prints the numbers up to %d."
command = "seq"
args = ["1", "%d"]
sandbox_profile = "none"
side_effects = []
requires_approval = false
`, lines, lines))
	a, b := c.startNode(), c.startNode()
	want := countTo(lines)

	status, m := a.statelessSend(t, "tools/call", "count", modernRequest("1", "tools/call", `"name":"count","arguments":{}`))
	if status != http.StatusOK {
		t.Fatalf("the call on A: %d %v", status, m)
	}
	uri := outputLink(t, m)
	if strings.Contains(fmt.Sprint(m), "\n10000\n") {
		t.Fatalf("the result shows the whole output; it should be cut: %v", m)
	}

	read := func(n *clusterNode, id int) (int, map[string]any) {
		return n.statelessSend(t, "resources/read", uri, modernRequest(fmt.Sprint(id), "resources/read", fmt.Sprintf(`"uri":%q`, uri)))
	}
	status, m = read(b, 2)
	if got := readContents(t, "the read through B", m); status != http.StatusOK || got != want {
		t.Fatalf("the read through B: %d, %d bytes, want %d: %.300v", status, len(got), len(want), m)
	}
	if _, m := read(a, 3); readContents(t, "the read on A", m) != want {
		t.Fatalf("the read on A: %.300v", m)
	}

	// A session's link, through the node that does not own the session.
	sid := a.initialize(t)
	r := b.post(t, sid, map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/call",
		"params": map[string]any{"name": "count", "arguments": map[string]any{}}})
	sessionURI := outputLink(t, r.last())
	r = b.post(t, sid, map[string]any{"jsonrpc": "2.0", "id": 5, "method": "resources/read",
		"params": map[string]any{"uri": sessionURI}})
	if got := readContents(t, "a session's read through B", r.last()); r.status != http.StatusOK || got != want {
		t.Fatalf("a session's read through B: %d, %d bytes", r.status, len(got))
	}

	a.kill9()
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, m = read(b, 6)
		e, _ := m["error"].(map[string]any)
		if msg, _ := e["message"].(string); strings.Contains(msg, "the output was kept by a troupe node that has left the cluster") {
			if status != http.StatusOK || e["code"] != float64(-32602) {
				t.Fatalf("the read after A's death: %d %v", status, m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the read through B after A was killed: %d %.300v", status, m)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
