package app

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"troupe/identity"
	"troupe/tools"
)

// toolsServer is a resourceServer that also tells its tools, as
// *downstream.Server does.
type toolsServer struct {
	resourceServer
	tools []string
}

func (s *toolsServer) State() (string, []json.RawMessage, error) {
	var out []json.RawMessage
	for _, n := range s.tools {
		out = append(out, json.RawMessage(`{"name":"`+n+`"}`))
	}
	return "ready", out, nil
}

// TestGatewayPerIdentity: an identity's grant matches prompt names as it
// matches tool names, and shows a server's resources only to an identity
// that may use one of its tools; a caller without a grant sees all.
func TestGatewayPerIdentity(t *testing.T) {
	gh := &toolsServer{resourceServer: resourceServer{pagedPrompts: pagedPrompts{names: []string{"review"}, pageSize: 10},
		uris: []string{"gh://repo"}}, tools: []string{"issues"}}
	db := &toolsServer{resourceServer: resourceServer{pagedPrompts: pagedPrompts{names: []string{"query"}, pageSize: 10},
		uris: []string{"db://table"}}, tools: []string{"sql"}}
	g, _ := testGateway(tools.Policy{Allow: []string{"*"}},
		gatewayServer{name: "db", prefix: "db.", src: db}, gatewayServer{name: "gh", prefix: "gh.", src: gh})
	alice := &identity.Identity{Kind: identity.Token, Name: "alice", Tools: &identity.Grant{Allow: []string{"gh.*"}}}
	ctx := identity.NewContext(context.Background(), alice)

	list := func(ctx context.Context, f func(context.Context, json.RawMessage) (any, error)) string {
		res, err := f(ctx, json.RawMessage(`{"stateless":true}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		return string(b)
	}
	prompts := list(ctx, g.listPrompts)
	if !strings.Contains(prompts, `"gh.review"`) || strings.Contains(prompts, "db.query") || !strings.Contains(prompts, `"cacheScope":"private"`) {
		t.Errorf("alice's prompts: %s", prompts)
	}
	if _, err := g.getPrompt(ctx, json.RawMessage(`{"name":"db.query"}`)); err == nil || !strings.Contains(err.Error(), "unknown prompt") {
		t.Errorf("alice's prompts/get of db.query: %v, want unknown prompt", err)
	}
	if _, err := g.getPrompt(ctx, json.RawMessage(`{"name":"gh.review"}`)); err != nil {
		t.Errorf("alice's prompts/get of gh.review: %v", err)
	}
	resources := list(ctx, g.listResources)
	if !strings.Contains(resources, "gh://repo") || strings.Contains(resources, "db://table") {
		t.Errorf("alice's resources: %s", resources)
	}
	db.reads, gh.reads = nil, nil
	_, _ = g.readResource(ctx, json.RawMessage(`{"uri":"db://table"}`))
	if len(db.reads) != 0 {
		t.Errorf("alice's read of db://table reached db: %q", db.reads)
	}

	// Without a grant, everything, as before (db's page comes first).
	all := list(context.Background(), g.listPrompts) + list(context.Background(), g.listResources)
	for _, want := range []string{"db.query", "db://table"} {
		if !strings.Contains(all, want) {
			t.Errorf("a caller without a grant does not see %s: %s", want, all)
		}
	}
	_, _ = g.readResource(context.Background(), json.RawMessage(`{"uri":"db://table"}`))
	if !slices.Equal(db.reads, []string{"db://table"}) {
		t.Errorf("a caller without a grant: db read %q", db.reads)
	}
	// A 2026-07-28 listen request's resourceSubscriptions: alice's watch
	// keeps only the URIs of servers she may use, as resources/subscribe
	// (both are known now: listed above without a grant).
	ss := &subscriptions{g: g, byURI: map[string]*heldURI{}, watching: map[string]bool{}}
	if got := ss.watch(&fakeSession{id: "listen-a"}, alice, []string{"gh://repo", "db://table"}); !slices.Equal(got, []string{"gh://repo"}) {
		t.Errorf("alice's resourceSubscriptions: %q, want only gh://repo", got)
	}
	if got := ss.watch(&fakeSession{id: "listen-b"}, nil, []string{"gh://repo", "db://table"}); len(got) != 2 {
		t.Errorf("a caller without a grant: resourceSubscriptions %q, want both", got)
	}
	ss.unwatch("listen-a")
	ss.unwatch("listen-b")
	ss.work.Wait()

}

// subscribingToolsServer is a server with tools that takes subscriptions.
type subscribingToolsServer struct {
	countingServer
	tools []string
}

func (s *subscribingToolsServer) State() (string, []json.RawMessage, error) {
	return (&toolsServer{tools: s.tools}).State()
}

// TestSubscriptionsKeepToTheCallersServers checks that a caller with a
// grant is never subscribed at a server it may not use: not when a URI of
// unknown owner is tried at every server, and not by joining another
// caller's hold of that server's URI (whose updates it would then hear).
func TestSubscriptionsKeepToTheCallersServers(t *testing.T) {
	db := &subscribingToolsServer{countingServer: countingServer{resourceServer: resourceServer{uris: []string{"db://table"}}}, tools: []string{"sql"}}
	gh := &subscribingToolsServer{countingServer: countingServer{resourceServer: resourceServer{uris: []string{"gh://repo"}}}, tools: []string{"issues"}}
	g, _ := testGateway(tools.Policy{Allow: []string{"*"}},
		gatewayServer{name: "db", prefix: "db.", src: db}, gatewayServer{name: "gh", prefix: "gh.", src: gh})
	ss := &subscriptions{g: g, byURI: map[string]*heldURI{}, watching: map[string]bool{}}
	alice := &identity.Identity{Kind: identity.Token, Name: "alice", Tools: &identity.Grant{Allow: []string{"gh.*"}}}
	subscribe := func(who *identity.Identity, s tools.Session, uri string) error {
		_, err := ss.subscribe(context.Background(), &tools.Request{Arguments: json.RawMessage(`{"uri":"` + uri + `"}`), Session: s, Identity: who})
		return err
	}

	// x://other's owner is unknown (never listed), so every server is a
	// candidate, db first: bob (no grant) holds it at db.
	if err := subscribe(nil, &fakeSession{id: "b1"}, "x://other"); err != nil || !slices.Equal(db.subs, []string{"x://other"}) {
		t.Fatalf("bob's subscribe: %v, db subscribed %q", err, db.subs)
	}
	// alice may not join that hold: she would hear db's updates.
	if err := subscribe(alice, &fakeSession{id: "a1"}, "x://other"); err == nil {
		t.Fatal("alice joined the hold of a server she may not use")
	}
	// A URI of unknown owner is tried only at the servers alice may use.
	if err := subscribe(alice, &fakeSession{id: "a2"}, "x://new"); err != nil || slices.Contains(db.subs, "x://new") || !slices.Equal(gh.subs, []string{"x://new"}) {
		t.Fatalf("alice's subscribe of x://new: %v; db %q, gh %q", err, db.subs, gh.subs)
	}
	ss.sessionEnded("a2")
	ss.sessionEnded("b1")
	ss.work.Wait()
}
