package e2e

// A resource subscription through troupe: server-everything's
// notifications/resources/updated reaches the subscribed session, once
// troupe has subscribed downstream for it.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestGatewayResourceSubscription(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	cfg := downstreamConfig(t, stdioServerTable("everything", command, args, "requires_approval = false"))
	fx := newFixture(t)
	s := startServer(t, fx.dir, "--config", cfg)
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	init, _ := s.recv()["result"].(map[string]any)
	caps, _ := init["capabilities"].(map[string]any)
	if r, _ := caps["resources"].(map[string]any); r["subscribe"] != true {
		t.Fatalf("initialize declares resources %v, want subscribe", caps["resources"])
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	const uri = "demo://resource/static/document/architecture.md"
	s.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`)
	if m := s.recv(); m["error"] != nil || m["result"] == nil {
		t.Fatalf("resources/subscribe: %v", m)
	}
	// server-everything sends updates for its subscriptions once this
	// tool has been called, at once and then every 5 s.
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"everything.toggle-subscriber-updates","arguments":{}}}`)
	updated, answered := false, false
	for range 20 {
		m := s.recv()
		switch {
		case m["id"] == 2.0:
			answered = true
		case m["method"] == "notifications/resources/updated":
			p, _ := m["params"].(map[string]any)
			if p["uri"] != uri {
				t.Fatalf("updated for %v, want %s", p["uri"], uri)
			}
			updated = true
		}
		if updated && answered {
			break
		}
	}
	if !updated || !answered {
		t.Fatalf("updated %v, call answered %v", updated, answered)
	}
	s.send(`{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"` + uri + `"}}`)
	for range 20 {
		if m := s.recv(); m["id"] == 3.0 {
			if m["error"] != nil {
				t.Fatalf("resources/unsubscribe: %v", m)
			}
			return
		}
	}
	t.Fatal("resources/unsubscribe was not answered")
}

// TestGatewayListenResourceSubscriptions: a 2026-07-28 client's
// subscriptions/listen with resourceSubscriptions is acknowledged with the
// URIs troupe watches (a denied one left out), troupe subscribes
// downstream for them, and server-everything's updates arrive on the
// listen request's stream with its subscription id; once the client
// cancels the listen request, no more arrive.
func TestGatewayListenResourceSubscriptions(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	cfg := downstreamConfig(t, "[resources]\ndeny = [\"demo://resource/dynamic/*\"]\n\n"+
		stdioServerTable("everything", command, args, "requires_approval = false"))
	fx := newFixture(t)
	s := startServer(t, fx.dir, "--config", cfg)

	const uri = "demo://resource/static/document/architecture.md"
	s.send(modernRequest(`"sub"`, "subscriptions/listen",
		`"notifications":{"resourceSubscriptions":["`+uri+`","demo://resource/dynamic/text/1"]}`))
	ack := s.recv()
	p, _ := ack["params"].(map[string]any)
	n, _ := p["notifications"].(map[string]any)
	got, _ := json.Marshal(n["resourceSubscriptions"])
	if ack["method"] != "notifications/subscriptions/acknowledged" || string(got) != `["`+uri+`"]` {
		t.Fatalf("acknowledgement: %v, want resourceSubscriptions [%s]", ack, uri)
	}
	// server-everything sends updates for its subscriptions once this
	// tool has been called, at once and then every 5 s; troupe subscribes
	// in the background, so the first may come before it has.
	s.send(modernRequest("1", "tools/call", `"name":"everything.toggle-subscriber-updates","arguments":{}`))
	updated := false
	for i := 0; i < 20 && !updated; i++ {
		m := s.recv()
		if m["method"] != "notifications/resources/updated" {
			continue
		}
		p, _ := m["params"].(map[string]any)
		meta, _ := p["_meta"].(map[string]any)
		if p["uri"] != uri || meta["io.modelcontextprotocol/subscriptionId"] != "sub" {
			t.Fatalf("updated: %v, want %s with subscription id sub", p, uri)
		}
		updated = true
	}
	if !updated {
		t.Fatal("no notifications/resources/updated on the listen stream")
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub"}}`)
	deadline := time.After(7 * time.Second) // past server-everything's next update
	for {
		select {
		case l := <-s.lines:
			if strings.Contains(l, "notifications/resources/updated") {
				t.Fatalf("an update after the listen request ended: %s", l)
			}
		case <-deadline:
			return
		}
	}
}
