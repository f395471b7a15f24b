package actors

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"troupe/protocol"
	"troupe/tools"
)

func TestRegistryChangeNotifiesAndKeepsCallsInFlight(t *testing.T) {
	release := make(chan struct{})
	c := newClient(t, Options{}, echoTool(), blockTool(nil, release))
	c.initialize("2025-06-18")
	c.request("slow", "tools/call", map[string]any{"name": "block"})
	time.Sleep(20 * time.Millisecond) // the call is running

	// The same tools again: nothing to tell.
	same, _ := tools.NewRegistry(echoTool(), blockTool(nil, release))
	c.host.SetRegistry(same)
	c.request(1, "ping", nil)
	if m := c.recv(); string(m.ID) != "1" {
		t.Fatalf("an unchanged registry must not notify; got %s", m.raw)
	}

	// block is gone, structured is new.
	next, _ := tools.NewRegistry(echoTool(), structuredTool())
	c.host.SetRegistry(next)
	if m := c.recv(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("want list_changed, got %s", m.raw)
	}
	c.request(2, "tools/list", nil)
	var res protocol.ListToolsResult
	if err := json.Unmarshal(c.recv().Result, &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "echo,structured" {
		t.Fatalf("tools after the change: %v", names)
	}
	c.request(3, "tools/call", map[string]any{"name": "block"})
	if r := c.toolResult(c.recv()); !r.IsError {
		t.Fatalf("a removed tool must not be callable: %+v", r)
	}
	// The call that started before the change finishes as it began.
	close(release)
	if r := c.toolResult(c.recv()); r.IsError || !strings.Contains(errorText(r), "released") {
		t.Fatalf("the call in flight: %+v", r)
	}

	// A session started after the change sees the new tools from the start.
	c2 := newClientOnHost(t, c.host)
	c2.initialize("2025-06-18")
	c2.request(1, "tools/call", map[string]any{"name": "structured"})
	if r := c2.toolResult(c2.recv()); r.IsError {
		t.Fatalf("new session does not see the new registry: %+v", r)
	}
}
