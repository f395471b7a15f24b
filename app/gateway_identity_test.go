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
	ctx := withCaller(context.Background(), alice)

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
}
