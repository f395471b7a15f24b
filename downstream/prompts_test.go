package downstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"troupe/downstream"
	"troupe/protocol"
)

// TestStdioPromptsAndCompletions: prompts come page by page exactly as the
// server sent them, and prompts/get and completion/complete send the
// server what they were given.
func TestStdioPromptsAndCompletions(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := c.ListPrompts(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) != 1 || string(first.Items[0]) != rawPrompts[0] || first.NextCursor != "p2" {
		t.Fatalf("first page: %+v", first)
	}
	second, err := c.ListPrompts(ctx, first.NextCursor)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Items) != 1 || string(second.Items[0]) != rawPrompts[1] || second.NextCursor != "" {
		t.Fatalf("second page: %+v", second)
	}
	got, err := c.GetPrompt(ctx, "greet", json.RawMessage(`{"who":"you"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"sent":{"name":"greet","arguments":{"who":"you"}}}`; string(got) != want {
		t.Errorf("prompts/get sent %s, want %s", got, want)
	}
	params := `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"y"}}`
	got, err = c.Complete(ctx, json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"sent":` + params + `}`; string(got) != want {
		t.Errorf("completion/complete sent %s, want %s", got, want)
	}
}

// TestStdioListsChanged: notifications/prompts/list_changed and
// notifications/resources/list_changed reach Handlers.PromptsChanged and
// ResourcesChanged.
func TestStdioListsChanged(t *testing.T) {
	changed := make(chan string, 2)
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{PromptsChanged: func() { changed <- "prompts" },
		ResourcesChanged: func() { changed <- "resources" }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.ListPrompts(ctx, "changed"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListResources(ctx, "changed"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prompts", "resources"} {
		select {
		case got := <-changed:
			if got != want {
				t.Errorf("%s changed, want %s", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s changes were not told", want)
		}
	}
}

// TestStdioResources: resources and templates come as the server sent
// them, and resources/read sends the URI.
func TestStdioResources(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.ListResources(ctx, "")
	if err != nil || len(list.Items) != 1 || string(list.Items[0]) != `{"uri":"test://a","name":"a"}` {
		t.Fatalf("resources/list: %+v, %v", list, err)
	}
	templates, err := c.ListResourceTemplates(ctx, "")
	if err != nil || len(templates.Items) != 1 || string(templates.Items[0]) != `{"uriTemplate":"test://t/{x}","name":"t"}` {
		t.Fatalf("resources/templates/list: %+v, %v", templates, err)
	}
	got, err := c.ReadResource(ctx, "test://a")
	if err != nil || string(got) != `{"sent":{"uri":"test://a"}}` {
		t.Fatalf("resources/read sent %s, %v", got, err)
	}
}

// TestStdioHugePage: a page of 100,000 resources (about 6 MB on one
// line, more than a client's message may be) comes through whole: a
// server's messages are bounded like HTTP answers (16 MiB), not lost.
func TestStdioHugePage(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	// A guard against a hang, not a speed target: 6 MB of JSON through the
	// race detector takes about 10 s on a loaded 2-core machine.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := c.ListResources(ctx, "huge")
	if err != nil || len(list.Items) != 100_000 || string(list.Items[99_999]) != `{"uri":"test://r/099999","name":"resource 099999","mimeType":"text/plain"}` {
		t.Fatalf("resources/list: %d items, %v", len(list.Items), err)
	}
}

// TestStdioResourceSubscription: Subscribe reaches the server, whose
// notifications/resources/updated reaches Handlers.ResourceUpdated.
func TestStdioResourceSubscription(t *testing.T) {
	updated := make(chan string, 1)
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{ResourceUpdated: func(p json.RawMessage) { updated <- string(p) }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, "test://a"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-updated:
		if p != `{"uri":"test://a"}` {
			t.Errorf("updated: %s", p)
		}
	case <-ctx.Done():
		t.Fatal("ResourceUpdated was not called")
	}
	if err := c.Unsubscribe(ctx, "test://a"); err != nil {
		t.Fatal(err)
	}
}

// TestModernServerResources: a 2026-07-28 server's resource templates
// and its "not found" come through as it sent them, without the hop's
// own members.
func TestModernServerResources(t *testing.T) {
	_, url := dualEraServer(t, echoTool())
	c := dial(t, modernConfig(url), downstream.Handlers{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := c.ListResourceTemplates(ctx, "")
	if err != nil || len(page.Items) != 1 || !strings.Contains(string(page.Items[0]), `"uriTemplate":"troupe://output/`) {
		t.Fatalf("resources/templates/list: %+v, %v", page, err)
	}
	if page.TTLMs == nil || !page.Private {
		t.Errorf("the cache hint was not read: %+v", page)
	}
	_, err = c.ReadResource(ctx, "troupe://output/nope/stdout")
	var rpc *downstream.RPCError
	if !errors.As(err, &rpc) || rpc.Code != protocol.CodeInvalidParams {
		t.Fatalf("reading what is not there: %v, want -32602", err)
	}
}

// TestHopless: the members a 2026-07-28 result has for its own hop go; the
// rest stays as it was.
func TestHopless(t *testing.T) {
	raw := `{"resultType":"complete","ttlMs":5,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"},"x.y/k":1},"messages":[]}`
	got, ttl, private := downstream.Hopless(json.RawMessage(raw))
	if string(got) != `{"_meta":{"x.y/k":1},"messages":[]}` || ttl == nil || *ttl != 5 || !private {
		t.Errorf("hopless: %s, %v, %v", got, ttl, private)
	}
	plain := `{"messages":[ 1 ]}`
	if got, _, _ := downstream.Hopless(json.RawMessage(plain)); string(got) != plain {
		t.Errorf("a result without hop members changed: %s", got)
	}
}
