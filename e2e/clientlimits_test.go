package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// What a client says about itself is bounded, end to end: an initialize
// whose clientInfo.name is a megabyte (well within the 4 MiB message
// limits) or whose capabilities are that large is refused with -32602
// naming the field and its limit, over stdio and over HTTP, and no session
// keeps it; a call's _meta is bounded too. A name at the limit is served,
// and the status page shows it.
func TestClientLimitsStdio(t *testing.T) {
	s := startLineServer(t, t.TempDir(), "-c", "codex.enabled=false")
	huge := strings.Repeat("n", 1<<20)
	m := s.initialize(huge, nil)
	wantRefused(t, m, "clientInfo.name is 1048576 bytes; at most 256 bytes are accepted")
	m = s.call(1, "initialize", map[string]any{"protocolVersion": "2025-06-18",
		"capabilities": map[string]any{"experimental": map[string]any{"x": huge}}, "clientInfo": map[string]any{"name": "c", "version": "1"}})
	wantRefused(t, m, "capabilities is 1048601 bytes; at most 65536 bytes are accepted")

	if m := s.initialize(strings.Repeat("n", 256), nil); m["error"] != nil {
		t.Fatalf("initialize with a 256-byte name: %v", m["error"])
	}
	m = s.call(2, "tools/call", map[string]any{"name": "repo.listDir", "arguments": map[string]any{"path": "."},
		"_meta": map[string]any{"x": huge}})
	wantRefused(t, m, "_meta is 1048584 bytes; at most 131072 bytes are accepted")
	if m := s.call(3, "tools/call", map[string]any{"name": "repo.listDir", "arguments": map[string]any{"path": "."}}); m["error"] != nil {
		t.Fatalf("the session does not serve calls after the refusals: %v", m["error"])
	}
}

func TestClientLimitsHTTP(t *testing.T) {
	srv := startHTTPServer(t, t.TempDir(), newToken(t), "-c", "codex.enabled=false")
	post := func(params map[string]any) (*http.Response, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
		resp := srv.request(t, http.MethodPost, strings.NewReader(string(b)), map[string]string{
			"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("initialize: %s %.300s", resp.Status, body)
		}
		return resp, m
	}
	huge := strings.Repeat("n", 1<<20)
	for _, c := range []struct {
		info, caps map[string]any
		want       string
	}{
		{map[string]any{"name": huge, "version": "1"}, map[string]any{}, "clientInfo.name is 1048576 bytes; at most 256 bytes are accepted"},
		{map[string]any{"name": "c", "version": huge}, map[string]any{}, "clientInfo.version is 1048576 bytes"},
		{map[string]any{"name": "c", "version": "1"}, map[string]any{"experimental": map[string]any{"x": huge}}, "capabilities is 1048601 bytes"},
	} {
		resp, m := post(map[string]any{"protocolVersion": "2025-06-18", "capabilities": c.caps, "clientInfo": c.info})
		wantRefused(t, m, c.want)
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			t.Errorf("a refused initialize got session %s", id)
		}
	}
	name := strings.Repeat("n", 256)
	resp, m := post(map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": name, "version": "1"}})
	if m["error"] != nil || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize with a 256-byte name: %v", m)
	}
	// A refused initialize's session ends just after its answer: wait
	// for the view to hold only the one initialized.
	var snap struct {
		Sessions []struct {
			Client string `json:"client"`
		} `json:"sessions"`
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := adminGet(t, srv, "/status/")
		snap.Sessions = nil
		if code != http.StatusOK || json.Unmarshal(body, &snap) != nil {
			t.Fatalf("/status/: %d %.300s", code, body)
		}
		if len(body) > 64<<10 {
			t.Errorf("/status/ is %d bytes with one session", len(body))
		}
		if len(snap.Sessions) == 1 && snap.Sessions[0].Client == name {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("/status/ shows %+v, want the one session initialized, with its name", snap.Sessions)
		}
	}
}

// wantRefused checks that m is a -32602 error whose message contains want.
func wantRefused(t *testing.T, m map[string]any, want string) {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32602) {
		b, _ := json.Marshal(m)
		t.Fatalf("want -32602 (%s), got %.300s", want, b)
	}
	if msg, _ := e["message"].(string); !strings.Contains(msg, want) {
		t.Fatalf("the error %q does not say %q", msg, want)
	}
}
