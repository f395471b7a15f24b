package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPRefusesCrossOrigin: a browser page from another origin must not
// reach the tools of a troupe listening on loopback (the spec's DNS
// rebinding warning), with or without a token; a loopback origin may.
func TestHTTPRefusesCrossOrigin(t *testing.T) {
	forEachAuth(t, func(t *testing.T, fx fixture, srv *httpServer, token string) {

		resp, body := postInitialize(t, srv, "http://evil.example")
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-origin initialize: status %s, want 403; body %s", resp.Status, body)
		}
		var refusal struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &refusal); err != nil || !strings.Contains(refusal.Error.Message, "evil.example") {
			t.Errorf("403 body %s: want a JSON-RPC error naming the origin", body)
		}
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			t.Errorf("a refused request got session %s", id)
		}

		// The control: the same request from a loopback origin is
		// served, so the 403 was the origin's doing.
		resp, body = postInitialize(t, srv, "http://localhost:5173")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("loopback-origin initialize: status %s, session %q, want 200 and a session; body %s",
				resp.Status, resp.Header.Get("Mcp-Session-Id"), body)
		}
		del := srv.request(t, http.MethodDelete, nil, map[string]string{
			"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id"), "Origin": "http://localhost:5173"})
		del.Body.Close()
		if del.StatusCode != http.StatusNoContent {
			t.Errorf("DELETE of the session: status %s, want 204", del.Status)
		}
	})
}

// postInitialize sends an initialize request from origin and returns the
// response with its body read.
func postInitialize(t *testing.T, srv *httpServer, origin string) (*http.Response, []byte) {
	t.Helper()
	msg := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
		`"capabilities":{},"clientInfo":{"name":"troupe-e2e-go","version":"0.0.0"}}}`
	resp := srv.request(t, http.MethodPost, strings.NewReader(msg), map[string]string{
		"Origin":       origin,
		"Content-Type": "application/json",
		"Accept":       "application/json, text/event-stream",
	})
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer to initialize: %v", err)
	}
	return resp, body
}

// request sends one request to the MCP endpoint, with the bearer token if
// the server wants one.
func (s *httpServer) request(t *testing.T, method string, body io.Reader, headers map[string]string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, s.url, body)
	if err != nil {
		t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, s.url, err)
	}
	return resp
}
