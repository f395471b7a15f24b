package config

import (
	"strings"
	"testing"
	"time"
)

// limits.mcp_servers_startup_wait: 500 ms by default (troupe's own tools
// must reach Codex's first model request), settable in every layer, and
// refused outside 0s..1m with the key named.
func TestMcpServersStartupWait(t *testing.T) {
	c, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.McpServersStartupWait != 500*time.Millisecond {
		t.Fatalf("default %s, want 500ms", c.Limits.McpServersStartupWait)
	}
	c, err = load(t, "", []string{"HOME=" + t.TempDir(), "TROUPE_LIMITS__MCP_SERVERS_STARTUP_WAIT=0s"})
	if err != nil || c.Limits.McpServersStartupWait != 0 {
		t.Fatalf("0s from the environment: %v, %v", c, err)
	}
	c, err = load(t, "", nil, `limits.mcp_servers_startup_wait="10s"`)
	if err != nil || c.Limits.McpServersStartupWait != 10*time.Second {
		t.Fatalf("10s from -c: %v", err)
	}
	for _, bad := range []string{`"-1s"`, `"2m"`} {
		_, err := load(t, "", nil, "limits.mcp_servers_startup_wait="+bad)
		if err == nil || !strings.Contains(err.Error(), "limits.mcp_servers_startup_wait") {
			t.Errorf("%s: %v, want a refusal naming the key", bad, err)
		}
	}
}
