package mcphttp

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"troupe/actors"
	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
)

// fakeCluster joins rigs in one test binary as the nodes of a cluster:
// Forward serves the request with the member's own Handler
// (ServeForwarded, as the cluster's tunnel does), writing straight to the
// front's ResponseWriter. Only the transport between nodes is left out;
// both nodes' fronts, hosts and checks are real.
type fakeCluster struct {
	self string
	mu   sync.Mutex
	// nodes are the members in the cluster; a member removed has left.
	nodes map[string]*Handler
	// forwarded lists the members requests were forwarded to.
	forwarded []string
}

func (c *fakeCluster) NewSessionID() string { return "" }

func (c *fakeCluster) Owner(string) (string, bool) { return c.self, true }

func (c *fakeCluster) Ready() bool { return true }

func (c *fakeCluster) Forward(w http.ResponseWriter, r *http.Request, body []byte, member string) error {
	c.mu.Lock()
	h := c.nodes[member]
	c.forwarded = append(c.forwarded, member)
	c.mu.Unlock()
	if h == nil {
		return errors.New("no such member")
	}
	fr := r.Clone(r.Context())
	fr.Body, fr.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	h.ServeForwarded(w, fr)
	return nil
}

// clusterOutputRig is node member of cluster nodes: loudTool with a small
// inline view, its Host named as the member's.
func clusterOutputRig(t *testing.T, member string, nodes map[string]*Handler) (*rig, *fakeCluster) {
	t.Helper()
	c := &fakeCluster{self: member, nodes: nodes}
	r := newRig(t, rigConfig{tools: []tools.Tool{loudTool(50_000)},
		opts:    Options{BearerToken: "alpha", Cluster: c},
		session: actors.SessionOptions{SpoolDir: t.TempDir(), Spool: spool.Limits{InlineBytes: 512}}})
	r.token = "alpha"
	r.host.SetNode(member)
	nodes[member] = r.h
	return r, c
}

// A 2026-07-28 call's output stays on the node that ran it, and its link
// names that node: a resources/read of it through another node's front is
// sent there and returns the whole output, as the keeper's own front does;
// another caller gets the keeper's "not found" (the keeper checks the read
// as any other); a link naming this node is served here without a hop; and
// once the keeper has left the cluster the read gets an error that says
// so. Before links named their node, the other front looked in its own
// stores and answered "not found".
func TestModernOutputLinkReadThroughAnotherNode(t *testing.T) {
	nodes := map[string]*Handler{}
	a, _ := clusterOutputRig(t, "nodeA", nodes)
	b, cb := clusterOutputRig(t, "nodeB", nodes)

	uri := modernLoudCall(t, a, 1)
	if node, ok := spool.NodeOf(uri); !ok || node != "nodeA" || !strings.HasPrefix(uri, spool.URIPrefix+"nodeA_c-") {
		t.Fatalf("the link %q does not name node A", uri)
	}
	waitFor(t, 5*time.Second, "the call's hidden session to end", a.h.idle)

	_, m, body := modernRead(t, a, 2, uri)
	local := readText(t, m, body)
	status, m, body := modernRead(t, b, 3, uri)
	if got := readText(t, m, body); status != http.StatusOK || got != local || !strings.HasPrefix(got, "000000000\n") {
		t.Fatalf("the read through B: %d, %d bytes, want the %d bytes A serves", status, len(got), len(local))
	}
	if len(local) != 50_000 {
		t.Fatalf("the whole output is %d bytes, want 50000", len(local))
	}
	if cb.forwarded[len(cb.forwarded)-1] != "nodeA" {
		t.Fatalf("B forwarded to %v", cb.forwarded)
	}

	// B's own output is read on B, with no hop.
	uriB := modernLoudCall(t, b, 4)
	hops := len(cb.forwarded)
	if _, m, body := modernRead(t, b, 5, uriB+"?length=10"); readText(t, m, body) != "000000000\n" || len(cb.forwarded) != hops {
		t.Fatalf("B's own output: %s (hops %d → %d)", body, hops, len(cb.forwarded))
	}

	// Another caller, through B: A answers as for an unknown output.
	for _, r := range []*rig{a, b} {
		r.h.SetAuth(namedTokens("another", "beta"))
		r.token = "beta"
	}
	_, m, body = modernRead(t, b, 6, uri)
	if m.Error == nil || m.Error.Code != protocol.CodeInvalidParams || !strings.Contains(m.Error.Message, "not found") ||
		strings.Contains(string(body), "000000000") {
		t.Fatalf("another caller's read through B: %s", body)
	}
	for _, r := range []*rig{a, b} {
		r.h.SetBearerToken("alpha")
		r.token = "alpha"
	}

	// A leaves the cluster.
	cb.mu.Lock()
	delete(nodes, "nodeA")
	cb.mu.Unlock()
	status, m, body = modernRead(t, b, 7, uri)
	if status != http.StatusOK || m.Error == nil || m.Error.Code != protocol.CodeInvalidParams ||
		!strings.Contains(m.Error.Message, "the output was kept by a troupe node that has left the cluster") {
		t.Fatalf("a read of a departed node's output: %d %s", status, body)
	}
}

// One process: output ids name no node, and reads are served as before.
func TestModernOutputLinkOfOneProcessNamesNoNode(t *testing.T) {
	r, _, _ := outputRig(t, 0)
	uri := modernLoudCall(t, r, 1)
	if node, ok := spool.NodeOf(uri); ok || strings.Contains(uri, "_") {
		t.Fatalf("the link %q names a node (%q)", uri, node)
	}
	if _, m, body := modernRead(t, r, 2, uri+"?length=10"); readText(t, m, body) != "000000000\n" {
		t.Fatalf("the read: %s", body)
	}
}
