package e2e

// The gateway methods are observed like tool calls: /metrics counts them
// under their tools' names.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestGatewayMethodsInMetrics(t *testing.T) {
	fx := newFixture(t)
	token := newToken(t)
	// statusConfig has a downstream server (one that cannot start): the
	// gateway serves, with that server's part of the list empty.
	srv := startHTTPServer(t, fx.dir, token, "--config", statusConfig(t, false))
	before := scrape(t, srv)
	s := openSession(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp := s.post(ctx, t, `{"jsonrpc":"2.0","id":5,"method":"prompts/list"}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"prompts":[]`) {
		t.Fatalf("prompts/list: %s %s", resp.Status, body)
	}
	s.end(t)
	labels := map[string]string{"tool": "prompts.list", "outcome": "ok", "era": "legacy", "identity": "token:default"}
	deadline := time.Now().Add(10 * time.Second)
	for counter(scrape(t, srv), "troupe_calls_total", labels)-counter(before, "troupe_calls_total", labels) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("troupe_calls_total%v did not count prompts/list", labels)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
