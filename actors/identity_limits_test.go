package actors

import (
	"encoding/json"
	"strings"
	"testing"

	"troupe/limits"
	"troupe/protocol"
	"troupe/tools"
)

// rateLimitedData decodes m's error as a rate-limit refusal, failing the
// test when it is anything else.
func rateLimitedData(t *testing.T, m msg) protocol.RateLimited {
	t.Helper()
	if m.Error == nil || m.Error.Code != protocol.CodeRateLimited {
		t.Fatalf("want a -31429 error, got %s", m.raw)
	}
	var d protocol.RateLimited
	if err := json.Unmarshal(m.Error.Data, &d); err != nil || d.Kind != "rate_limited" || d.CorrelationID == "" || d.RetryAfterSeconds < 1 {
		t.Fatalf("error data %s: want kind rate_limited, retryAfterSeconds and a correlationId", m.Error.Data)
	}
	return d
}

// The N+1th counted request in a minute is refused with -31429 naming the
// limit and its setting; tools/list does not count; a new session of the
// same identity (stdio's local user) starts where the last one stopped.
func TestIdentityRateLimit(t *testing.T) {
	lim := limits.NewLimiter(limits.NewLocal(), limits.Rules{Default: limits.Limits{CallsPerMinute: 3}})
	c := newClient(t, Options{Session: SessionOptions{Limits: lim}}, echoTool())
	c.initialize("2025-06-18")
	for i := range 5 {
		c.request(100+i, "tools/list", nil)
		if m := c.recv(); m.Error != nil {
			t.Fatalf("tools/list %d: %s", i, m.raw)
		}
	}
	for i := range 3 {
		c.request(i+1, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
		c.toolResult(c.recv())
	}
	c.request(4, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	m := c.recv()
	d := rateLimitedData(t, m)
	if d.RetryAfterSeconds != 20 {
		t.Fatalf("retryAfterSeconds %d, want 20 (3 per minute)", d.RetryAfterSeconds)
	}
	if !strings.Contains(m.Error.Message, "3 calls per minute") || !strings.Contains(m.Error.Message, "limits.rate.calls_per_minute") {
		t.Fatalf("message %q does not name the limit and its setting", m.Error.Message)
	}

	// Another connection of the same user: a new session, the same bucket.
	c2 := newClientOnHost(t, c.host)
	c2.initialize("2025-06-18")
	c2.request(1, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	rateLimitedData(t, c2.recv())

	// A reload raising the bound applies to the next call.
	lim.Set(limits.Rules{Default: limits.Limits{CallsPerMinute: 100}})
	c2.request(2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	c2.toolResult(c2.recv())
}

// A per-tool bound counts the tools its glob matches, and no others.
func TestIdentityToolRateLimit(t *testing.T) {
	lim := limits.NewLimiter(limits.NewLocal(), limits.Rules{Default: limits.Limits{Tools: map[string]int{"ec*": 1}}})
	release := make(chan struct{})
	close(release)
	c := newClient(t, Options{Session: SessionOptions{Limits: lim}}, echoTool(), blockTool(nil, release))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	c.toolResult(c.recv())
	c.request(2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	m := c.recv()
	rateLimitedData(t, m)
	if !strings.Contains(m.Error.Message, `limits.rate.tools."ec*"`) {
		t.Fatalf("message %q does not name the glob's setting", m.Error.Message)
	}
	for i := range 3 {
		c.request(10+i, "tools/call", map[string]any{"name": "block", "arguments": map[string]any{}})
		c.toolResult(c.recv())
	}
}

// max_concurrent_calls refuses (does not queue) a call over it; the slot
// comes back when a call ends, answered or cancelled.
func TestIdentityConcurrentCalls(t *testing.T) {
	lim := limits.NewLimiter(limits.NewLocal(), limits.Rules{Default: limits.Limits{MaxConcurrentCalls: 1}})
	cancelled := make(chan struct{}, 1)
	release := make(chan struct{})
	c := newClient(t, Options{Session: SessionOptions{Limits: lim}}, echoTool(), blockTool(cancelled, release))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "block", "arguments": map[string]any{}})
	c.request(2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	m := c.recv()
	for m.Error == nil { // block's progress notification may come first
		m = c.recv()
	}
	if string(m.ID) != "2" {
		t.Fatalf("want call 2 refused, got %s", m.raw)
	}
	rateLimitedData(t, m)
	if !strings.Contains(m.Error.Message, "1 concurrent calls") {
		t.Fatalf("message %q", m.Error.Message)
	}
	// Cancelling the running call frees its slot.
	c.notify("notifications/cancelled", map[string]any{"requestId": 1})
	<-cancelled
	deadline := 50
	for {
		c.request(3, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
		m := c.recv()
		if m.Error == nil {
			break
		}
		// The slot comes back as the cancelled call is recorded, which
		// may be a moment after the tool saw its context end.
		rateLimitedData(t, m)
		if deadline--; deadline == 0 {
			t.Fatal("the cancelled call's slot never came back")
		}
		c.expectNothing(20e6)
	}
	// An answered call frees its slot too.
	c.request(4, "tools/call", map[string]any{"name": "block", "arguments": map[string]any{}})
	close(release)
	for {
		m := c.recv()
		if string(m.ID) == "4" {
			c.toolResult(m)
			break
		}
	}
	c.request(5, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	c.toolResult(c.recv())
}

// A method beside MCP (Codex's management methods) is a call, and counts
// as one: no way around tools/call's limits.
func TestIdentityLimitsCountMethods(t *testing.T) {
	m := &echoMethod{sessions: map[string]tools.Session{}, ended: make(chan string, 4)}
	reg, err := tools.NewRegistry(m)
	if err != nil {
		t.Fatal(err)
	}
	lim := limits.NewLimiter(limits.NewLocal(), limits.Rules{Default: limits.Limits{CallsPerMinute: 2}})
	c := newClient(t, Options{Session: SessionOptions{Methods: reg, Limits: lim,
		MethodTools: map[string][]string{"echoBack": {"echo"}}}}, echoTool())
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	c.toolResult(c.recv())
	c.request(2, "echoBack", map[string]any{"n": 2})
	if r := c.recv(); r.Error != nil {
		t.Fatalf("the method within the limit: %s", r.raw)
	}
	c.request(3, "echoBack", map[string]any{"n": 3})
	rateLimitedData(t, c.recv())
	c.request(4, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}})
	rateLimitedData(t, c.recv())
}
