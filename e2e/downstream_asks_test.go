package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// A downstream's questions during a call (elicitation/create, and
// sampling/createMessage for a server with sampling = true) reach the client
// that made the call, and its answer goes back.

// TestDownstreamRelaysElicitationHTTP: server-everything over streamable
// HTTP sends trigger-elicitation-request's elicitation/create on the call's
// own POST response stream; the client that made the call answers it.
func TestDownstreamRelaysElicitationHTTP(t *testing.T) {
	requireDownstream(t)
	endpoint := startEverythingHTTP(t)
	cfg := downstreamConfig(t, fmt.Sprintf("[mcp_servers.everything]\nurl = %q\nrequires_approval = false\n", endpoint))
	res := throughTroupe(t, cfg, []step{callTool("everything.trigger-elicitation-request", nil)},
		map[string]any{"action": "accept", "content": map[string]any{"name": "Ada", "check": true}})
	if !strings.Contains(string(res.Steps[0].Result), `Name: Ada`) {
		t.Errorf("elicitation through troupe: %v", res.Steps[0])
	}
	if len(res.Elicitations) != 1 || !strings.Contains(string(res.Elicitations[0]), "Please provide inputs") {
		t.Errorf("elicitations: %q", res.Elicitations)
	}
}
