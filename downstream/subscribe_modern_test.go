package downstream_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"troupe/actors"
	"troupe/downstream"
	"troupe/identity"
	"troupe/mcphttp"
	"troupe/protocol"
	"troupe/tools"
)

// watcherTool is a gateway's resources.subscribe that serves
// resourceSubscriptions (actors.ResourceWatcher): it reports each Watch
// and Unwatch, so a test sees what the listen requests it gets carry.
type watcherTool struct {
	watched   chan watchEvent
	unwatched chan string
}

type watchEvent struct {
	holder tools.Session
	uris   []string
}

func (w watcherTool) Spec() tools.Spec {
	return tools.Spec{Name: actors.GatewayTool(protocol.MethodResourcesSubscribe), Description: "test",
		InputSchema: json.RawMessage(`{"type":"object"}`), ServerValidates: true}
}

func (w watcherTool) Call(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
	return &protocol.CallToolResult{StructuredContent: struct{}{}}, nil
}

func (w watcherTool) Watch(holder tools.Session, _ *identity.Identity, uris []string) []string {
	w.watched <- watchEvent{holder, slices.Clone(uris)}
	return uris
}

func (w watcherTool) Unwatch(id string) { w.unwatched <- id }

// A 2026-07-28 server gets no resources/subscribe: the client carries the
// URIs it subscribes to as resourceSubscriptions of its listen request,
// opened anew when the set changes, and the server's updates on it reach
// Handlers.ResourceUpdated.
func TestModernSubscribeListens(t *testing.T) {
	w := watcherTool{watched: make(chan watchEvent, 8), unwatched: make(chan string, 8)}
	gw, err := tools.NewRegistry(w)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(echoTool())
	discard := slog.New(slog.DiscardHandler)
	host := actors.NewHost(actors.Options{
		Session: actors.SessionOptions{Registry: reg, Gateway: gw,
			ServerInfo: protocol.Implementation{Name: "troupe-modern", Version: "0"}},
		Grace: 2 * time.Second, Logger: discard,
	})
	srv := httptest.NewServer(mcphttp.New(host, mcphttp.Options{Logger: discard}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		host.Close(5 * time.Second)
	})
	updated := make(chan string, 8)
	c := dial(t, modernConfig(srv.URL+"/mcp"), downstream.Handlers{ResourceUpdated: func(p json.RawMessage) {
		var u struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(p, &u)
		updated <- u.URI
	}})
	if c.Era() != protocol.EraStateless {
		t.Fatalf("era %s", c.Era())
	}
	next := func(want ...string) watchEvent {
		t.Helper()
		select {
		case e := <-w.watched:
			if !slices.Equal(e.uris, want) {
				t.Fatalf("listen request carries %q, want %q", e.uris, want)
			}
			return e
		case <-time.After(10 * time.Second):
			t.Fatalf("no listen request with %q", want)
		}
		return watchEvent{}
	}
	ctx := context.Background()
	if err := c.Subscribe(ctx, "test://a"); err != nil {
		t.Fatal(err)
	}
	first := next("test://a")
	first.holder.Notify(protocol.NotificationResourcesUpdated, map[string]string{"uri": "test://a"})
	select {
	case u := <-updated:
		if u != "test://a" {
			t.Fatalf("updated %s", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's update was not heard")
	}
	if err := c.Subscribe(ctx, "test://b"); err != nil {
		t.Fatal(err)
	}
	second := next("test://a", "test://b")
	if id := <-w.unwatched; id != first.holder.ID() {
		t.Errorf("unwatched %s, want the first listen request's %s", id, first.holder.ID())
	}
	if err := c.Unsubscribe(ctx, "test://a"); err != nil {
		t.Fatal(err)
	}
	next("test://b")
	if id := <-w.unwatched; id != second.holder.ID() {
		t.Errorf("unwatched %s, want the second listen request's", id)
	}
	if err := c.Unsubscribe(ctx, "test://b"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.unwatched:
	case <-time.After(10 * time.Second):
		t.Fatal("the last listen request was not ended")
	}
}
