package mcphttp

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeFront is a cluster of two nodes, "self" and "other", as the
// front sees it: sessions named "<id>.other" belong to the other node, and
// Forward records what it was asked to carry.
type fakeFront struct {
	ready     atomic.Bool
	mu        sync.Mutex
	forwarded []string // method, session id and body of each forward
	gone      bool     // the other node has left
}

func (f *fakeFront) NewSessionID() string { return newSessionID() + ".self" }

func (f *fakeFront) Owner(id string) (string, bool) {
	_, member, _ := strings.Cut(id, ".")
	return member, member != "other"
}

func (f *fakeFront) Forward(w http.ResponseWriter, r *http.Request, body []byte, member string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		return errors.New("gone")
	}
	f.forwarded = append(f.forwarded, r.Method+" "+r.Header.Get("Mcp-Session-Id")+" "+string(body))
	w.WriteHeader(http.StatusTeapot)
	return nil
}

func (f *fakeFront) Ready() bool { return f.ready.Load() }

func TestClusterFrontRoutesOtherNodesSessions(t *testing.T) {
	fc := &fakeFront{}
	r := newRig(t, rigConfig{opts: Options{Cluster: fc}})

	// initialize makes a session this node owns, named so.
	id := r.initialize("2025-06-18")
	if !strings.HasSuffix(id, ".self") {
		t.Fatalf("session id %q does not name this node", id)
	}
	resp, body := r.post(id, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"result"`) {
		t.Fatalf("a local session's ping: %d %s", resp.StatusCode, body)
	}

	// Every method addressed to another node's session is carried there,
	// body and all, after this front's own checks.
	other := strings.Repeat("a", 32) + ".other"
	resp, _ = r.post(other, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if resp.StatusCode != http.StatusTeapot {
		t.Fatalf("POST to another node's session: %d", resp.StatusCode)
	}
	resp = r.do(http.MethodGet, other, "", "Accept", acceptSSE)
	resp.Body.Close()
	resp = r.do(http.MethodDelete, other, "")
	resp.Body.Close()
	fc.mu.Lock()
	got := strings.Join(fc.forwarded, "|")
	fc.mu.Unlock()
	want := "POST " + other + ` {"jsonrpc":"2.0","id":2,"method":"ping"}|GET ` + other + " |DELETE " + other + " "
	if got != want {
		t.Fatalf("forwarded %q, want %q", got, want)
	}

	// A request another node forwarded here is never forwarded again: a
	// session this node does not own is unknown.
	req := r.request(t.Context(), http.MethodPost, other, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	rec := httptest.NewRecorder()
	r.h.ServeForwarded(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Fatalf("a forwarded request for a session not here: %d", rec.Code)
	}

	// The owner has left: 404, the client initializes again.
	fc.mu.Lock()
	fc.gone = true
	fc.mu.Unlock()
	resp, body = r.post(other, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "session not found") {
		t.Fatalf("a session whose node left: %d %s", resp.StatusCode, body)
	}

	// A front still checks what it checks for its own sessions: no token, no route.
	fc.mu.Lock()
	n := len(fc.forwarded)
	fc.mu.Unlock()
	r.h.SetBearerToken("secret")
	resp, _ = r.post(other, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.forwarded) != n {
		t.Fatal("a request without the token was forwarded")
	}
}

func TestReadyz(t *testing.T) {
	alone := newRig(t, rigConfig{})
	if resp := alone.get("/readyz"); resp != http.StatusOK {
		t.Fatalf("one process: /readyz %d, want 200", resp)
	}
	fc := &fakeFront{}
	node := newRig(t, rigConfig{opts: Options{Cluster: fc}})
	if resp := node.get("/readyz"); resp != http.StatusServiceUnavailable {
		t.Fatalf("a node not joined: /readyz %d, want 503", resp)
	}
	fc.ready.Store(true)
	if resp := node.get("/readyz"); resp != http.StatusOK {
		t.Fatalf("a joined node: /readyz %d, want 200", resp)
	}
	node.h.StopAccepting()
	if resp := node.get("/readyz"); resp != http.StatusServiceUnavailable {
		t.Fatalf("a draining node: /readyz %d, want 503", resp)
	}
	resp, err := node.client.Post(node.base+"/readyz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /readyz: %d", resp.StatusCode)
	}
}

// get answers GET path's status.
func (r *rig) get(path string) int {
	resp, err := r.client.Get(r.base + path)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
