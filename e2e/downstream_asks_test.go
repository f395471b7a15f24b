package e2e

import (
	"fmt"
	"os"
	"path/filepath"
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

// cannedSampling is the TypeScript client's answer to a sampling request.
var cannedSampling = map[string]any{"role": "assistant", "model": "canned-model", "stopReason": "endTurn",
	"content": map[string]any{"type": "text", "text": "a canned completion"}}

// samplingThroughTroupe calls server-everything's trigger-sampling-request
// through troupe (server table srvTable) from a TypeScript SDK client that
// answers sampling with cannedSampling, and returns what the client saw
// and troupe's audit log.
func samplingThroughTroupe(t *testing.T, srvTable string) (result, string) {
	t.Helper()
	fx := newFixture(t)
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := downstreamConfig(t, fmt.Sprintf("[audit]\npath = %q\n\n", auditLog)+srvTable)
	tr := stdioTransport(t, fx.dir)
	tr.Args = append(tr.Args, "--config", cfg)
	res := runScenario(t, scenario{Transport: tr,
		Steps:    []step{callTool("everything.trigger-sampling-request", map[string]any{"prompt": "say hi", "maxTokens": 20})},
		Sampling: []map[string]any{cannedSampling}})
	b, _ := os.ReadFile(auditLog)
	return res, string(b)
}

func checkSampled(t *testing.T, res result, auditLog string) {
	t.Helper()
	if !res.Steps[0].OK || !strings.Contains(string(res.Steps[0].Result), "a canned completion") {
		t.Errorf("sampling through troupe: %v", res.Steps[0])
	}
	if len(res.Samplings) != 1 || !strings.Contains(string(res.Samplings[0]), "say hi") {
		t.Errorf("the client got sampling requests %q", res.Samplings)
	}
	if !strings.Contains(auditLog, `"tool":"everything.trigger-sampling-request"`) || !strings.Contains(auditLog, `"sampling":1`) {
		t.Errorf("the call's audit record does not count the relayed sampling:\n%s", auditLog)
	}
}

// TestDownstreamRelaysSamplingStdio: with sampling = true, troupe declares
// sampling to server-everything (which then offers trigger-sampling-request)
// and relays its sampling/createMessage to the calling client.
func TestDownstreamRelaysSamplingStdio(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	res, log := samplingThroughTroupe(t, stdioServerTable("everything", command, args, "requires_approval = false\nsampling = true"))
	checkSampled(t, res, log)
}

func TestDownstreamRelaysSamplingHTTP(t *testing.T) {
	requireDownstream(t)
	endpoint := startEverythingHTTP(t)
	res, log := samplingThroughTroupe(t, fmt.Sprintf("[mcp_servers.everything]\nurl = %q\nrequires_approval = false\nsampling = true\n", endpoint))
	checkSampled(t, res, log)
}

// TestDownstreamSamplingIsOptIn: without sampling = true troupe declares no
// sampling, so server-everything offers no sampling tool, and the client is
// never asked.
func TestDownstreamSamplingIsOptIn(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	res, _ := samplingThroughTroupe(t, stdioServerTable("everything", command, args, "requires_approval = false"))
	if res.Steps[0].OK && !strings.Contains(string(res.Steps[0].Result), "isError") || len(res.Samplings) != 0 {
		t.Errorf("without sampling = true: %v, samplings %q", res.Steps[0], res.Samplings)
	}
}
