package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	"troupe/downstream"
	"troupe/protocol"
	"troupe/tools"
)

// pagedPrompts is a promptSource whose prompts come pageSize at a time.
type pagedPrompts struct {
	names    []string
	pageSize int
	asked    []string // the names prompts/get was asked for
}

func (p *pagedPrompts) ListPrompts(_ context.Context, cursor string) (downstream.Page, error) {
	from := 0
	if cursor != "" {
		fmt.Sscanf(cursor, "at%d", &from)
	}
	to := min(from+p.pageSize, len(p.names))
	var page downstream.Page
	for _, n := range p.names[from:to] {
		page.Items = append(page.Items, json.RawMessage(`{"name":"`+n+`","description":"d"}`))
	}
	if to < len(p.names) {
		page.NextCursor = fmt.Sprintf("at%d", to)
	}
	return page, nil
}

func (p *pagedPrompts) GetPrompt(_ context.Context, name string, _ json.RawMessage) (json.RawMessage, error) {
	p.asked = append(p.asked, name)
	if !slices.Contains(p.names, name) {
		return nil, &downstream.RPCError{Code: protocol.CodeInvalidParams, Message: "no prompt " + name}
	}
	return json.RawMessage(`{"messages":[]}`), nil
}

func (p *pagedPrompts) Complete(context.Context, json.RawMessage) (json.RawMessage, error) {
	return nil, &downstream.RPCError{Code: protocol.CodeMethodNotFound, Message: "no completions"}
}

func (p *pagedPrompts) ListResources(context.Context, string) (downstream.Page, error) {
	return downstream.Page{}, nil
}

func (p *pagedPrompts) ListResourceTemplates(context.Context, string) (downstream.Page, error) {
	return downstream.Page{}, nil
}

func (p *pagedPrompts) ReadResource(context.Context, string) (json.RawMessage, error) {
	return nil, &downstream.RPCError{Code: protocol.CodeResourceNotFound, Message: "no"}
}

func testGateway(policy tools.Policy, servers ...gatewayServer) (*gateway, *bytes.Buffer) {
	var logs bytes.Buffer
	return &gateway{servers: func() []gatewayServer { return servers }, policy: func() tools.Policy { return policy },
		log: slog.New(slog.NewTextHandler(&logs, nil)), known: map[string]map[string]bool{}, held: map[string]*heldPage{},
		uris: map[string]map[string]bool{}, templates: map[string]map[string]*regexp.Regexp{}}, &logs
}

// listAll follows prompts/list's cursors and returns the names in order
// and how many pages it took.
func listAll(t *testing.T, g *gateway) ([]string, int) {
	t.Helper()
	var names []string
	var cursor *string
	for pages := 1; pages < 100; pages++ {
		params, _ := json.Marshal(map[string]any{"cursor": cursor})
		res, err := g.listPrompts(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		var page struct {
			Prompts []struct {
				Name string `json:"name"`
			} `json:"prompts"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Prompts {
			names = append(names, p.Name)
		}
		if page.NextCursor == "" {
			return names, pages
		}
		cursor = &page.NextCursor
	}
	t.Fatal("prompts/list never ends")
	return nil, 0
}

// TestGatewayPagesThroughTheServers: prompts/list goes through the servers
// in name order, a page of troupe's for each of a server's pages, with the
// servers' prefixes; a server without prompts adds no page.
func TestGatewayPagesThroughTheServers(t *testing.T) {
	a := &pagedPrompts{names: []string{"one", "two", "three"}, pageSize: 2}
	b := &pagedPrompts{}
	c := &pagedPrompts{names: []string{"four"}, pageSize: 2}
	g, _ := testGateway(tools.Policy{Allow: []string{"*"}},
		gatewayServer{name: "a", prefix: "a.", src: a}, gatewayServer{name: "b", prefix: "b.", src: b},
		gatewayServer{name: "c", prefix: "", src: c})
	names, pages := listAll(t, g)
	if want := []string{"a.one", "a.two", "a.three", "four"}; !slices.Equal(names, want) || pages != 3 {
		t.Errorf("listed %q in %d pages, want %q in 3", names, pages, want)
	}
	if _, err := g.getPrompt(context.Background(), json.RawMessage(`{"name":"a.two"}`)); err != nil {
		t.Errorf("a.two: %v", err)
	}
	if _, err := g.getPrompt(context.Background(), json.RawMessage(`{"name":"four"}`)); err != nil {
		t.Errorf("four: %v", err)
	}
	if !slices.Equal(a.asked, []string{"two"}) || !slices.Equal(c.asked, []string{"four"}) {
		t.Errorf("asked a for %q and c for %q", a.asked, c.asked)
	}
	if _, err := g.listPrompts(context.Background(), json.RawMessage(`{"cursor":"bogus"}`)); err == nil ||
		!strings.Contains(err.Error(), "unknown cursor") {
		t.Errorf("a bad cursor: %v", err)
	}
}

// TestGatewayCollisionsAndPolicy: of two servers offering the same name,
// the first in name order keeps it (with a warning naming both), and
// [prompts] deny hides prompts from lists and from prompts/get.
func TestGatewayCollisionsAndPolicy(t *testing.T) {
	a := &pagedPrompts{names: []string{"same", "hidden"}, pageSize: 10}
	b := &pagedPrompts{names: []string{"same", "own"}, pageSize: 10}
	g, logs := testGateway(tools.Policy{Allow: []string{"*"}, Deny: []string{"hidden"}},
		gatewayServer{name: "a", src: a}, gatewayServer{name: "b", src: b})
	names, _ := listAll(t, g)
	if want := []string{"same", "own"}; !slices.Equal(names, want) {
		t.Errorf("listed %q, want %q", names, want)
	}
	if !strings.Contains(logs.String(), `prompt name collision`) || !strings.Contains(logs.String(), `dropped="[mcp_servers.\"b\"]"`) {
		t.Errorf("no warning naming both servers:\n%s", logs)
	}
	if _, err := g.getPrompt(context.Background(), json.RawMessage(`{"name":"same"}`)); err != nil || len(b.asked) != 0 {
		t.Errorf("same: %v; b asked %q", err, b.asked)
	}
	if _, err := g.getPrompt(context.Background(), json.RawMessage(`{"name":"own"}`)); err != nil {
		t.Errorf("own: %v", err)
	}
	_, err := g.getPrompt(context.Background(), json.RawMessage(`{"name":"hidden"}`))
	if te, ok := tools.AsError(err); !ok || te.Kind != tools.KindInvalidArgument {
		t.Errorf("a denied prompt: %v, want invalid argument", err)
	}
}

// TestTemplatePattern: a URI template matches the URIs it expands to.
func TestTemplatePattern(t *testing.T) {
	for _, c := range []struct {
		tmpl, uri string
		match     bool
	}{
		{"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/text/3", true},
		{"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/text/3/more", false},
		{"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/3", false},
		{"file:///{+path}", "file:///a/b/c.txt", true},
		{"troupe://output/{id}/{stream}{?offset,length}", "troupe://output/c1/stdout?offset=4", true},
		{"troupe://output/{id}/{stream}{?offset,length}", "troupe://output/c1/stdout", true},
		{"a.b://x/{y}", "aXb://x/1", false},
	} {
		re := templatePattern(c.tmpl)
		if re == nil || re.MatchString(c.uri) != c.match {
			t.Errorf("%s against %s: want match %v", c.tmpl, c.uri, c.match)
		}
	}
}

// resourceServer serves fixed resources and templates, and reads only its
// own URIs.
type resourceServer struct {
	pagedPrompts
	uris, templates []string
	reads           []string
}

func (r *resourceServer) ListResources(context.Context, string) (downstream.Page, error) {
	var p downstream.Page
	for _, u := range r.uris {
		p.Items = append(p.Items, json.RawMessage(`{"uri":"`+u+`","name":"n"}`))
	}
	return p, nil
}

func (r *resourceServer) ListResourceTemplates(context.Context, string) (downstream.Page, error) {
	var p downstream.Page
	for _, u := range r.templates {
		p.Items = append(p.Items, json.RawMessage(`{"uriTemplate":"`+u+`","name":"n"}`))
	}
	return p, nil
}

func (r *resourceServer) ReadResource(_ context.Context, uri string) (json.RawMessage, error) {
	r.reads = append(r.reads, uri)
	return nil, &downstream.RPCError{Code: protocol.CodeResourceNotFound, Message: "not here"}
}

// TestGatewayResourceRouting: a read goes to the server that listed the
// URI (the first, of two, with a warning), else to those whose template
// matches first; nobody's URI is -32002, or -32602 for a 2026-07-28
// client.
func TestGatewayResourceRouting(t *testing.T) {
	a := &resourceServer{uris: []string{"x://same"}}
	b := &resourceServer{uris: []string{"x://same", "x://b"}, templates: []string{"y://b/{id}"}}
	g, logs := testGateway(tools.Policy{Allow: []string{"*"}}, gatewayServer{name: "a", src: a}, gatewayServer{name: "b", src: b})
	ctx := context.Background()
	res, err := g.listResources(ctx, json.RawMessage(`{"own":[{"uri":"troupe://output/1/stdout","name":"o"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); !strings.Contains(string(got), `"resources":[{"uri":"troupe://output/1/stdout","name":"o"},{"uri":"x://same","name":"n"}]`) {
		t.Errorf("first page: %s", got)
	}
	for range 2 { // a's page, then b's
		res, _ := json.Marshal(res)
		var page struct{ NextCursor string }
		_ = json.Unmarshal(res, &page)
		if page.NextCursor == "" {
			break
		}
		args, _ := json.Marshal(map[string]string{"cursor": page.NextCursor})
		if _, err := g.listResources(ctx, args); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(logs.String(), "resource URI collision") {
		t.Errorf("no collision warning:\n%s", logs)
	}
	if _, err := g.listTemplates(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	read := func(uri string, stateless bool) error {
		args, _ := json.Marshal(readArgs{URI: uri, Stateless: stateless})
		_, err := g.readResource(ctx, args)
		return err
	}
	_ = read("x://same", false)
	_ = read("y://b/7", false)
	// x://same is a's alone; y://b/7 is b's template, so b is asked first
	// (then a, since b had no such resource).
	if a.reads[0] != "x://same" || slices.Contains(b.reads, "x://same") || !slices.Equal(b.reads, []string{"y://b/7"}) {
		t.Errorf("a read %q, b read %q", a.reads, b.reads)
	}
	var rpc *downstream.RPCError
	if err := read("z://none", false); !errors.As(err, &rpc) || rpc.Code != protocol.CodeResourceNotFound {
		t.Errorf("nobody's URI: %v, want -32002", err)
	}
	if err := read("z://none", true); !errors.As(err, &rpc) || rpc.Code != protocol.CodeInvalidParams {
		t.Errorf("nobody's URI in 2026-07-28: %v, want -32602", err)
	}
}

// modernPage is a pagedPrompts whose pages carry a cache hint.
type modernPage struct {
	pagedPrompts
	ttl     int64
	private bool
}

func (m *modernPage) ListPrompts(ctx context.Context, cursor string) (downstream.Page, error) {
	p, err := m.pagedPrompts.ListPrompts(ctx, cursor)
	p.TTLMs, p.Private = &m.ttl, m.private
	return p, err
}

// TestGatewayCacheHint: a 2026-07-28 list page has the smallest TTL of
// its parts and is private when any part is; a part without a hint makes
// it 0; a session-based client's page has no hint.
func TestGatewayCacheHint(t *testing.T) {
	a := &modernPage{pagedPrompts: pagedPrompts{names: []string{"x"}, pageSize: 1}, ttl: 500}
	b := &modernPage{pagedPrompts: pagedPrompts{names: []string{"y"}, pageSize: 1}, ttl: 90, private: true}
	g, _ := testGateway(tools.Policy{Allow: []string{"*"}}, gatewayServer{name: "a", prefix: "a.", src: a},
		gatewayServer{name: "b", prefix: "b.", src: b})
	hint := func(params string) (any, any) {
		res, err := g.listPrompts(context.Background(), json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		m := res.(map[string]any)
		return m["ttlMs"], m["cacheScope"]
	}
	if ttl, scope := hint(`{"stateless":true}`); ttl != int64(500) || scope != "public" {
		t.Errorf("a's page: ttlMs %v, cacheScope %v; want 500, public", ttl, scope)
	}
	res, _ := g.listPrompts(context.Background(), json.RawMessage(`{}`))
	cursor := res.(map[string]any)["nextCursor"].(string)
	if ttl, scope := hint(`{"stateless":true,"cursor":"` + cursor + `"}`); ttl != int64(90) || scope != "private" {
		t.Errorf("b's page: ttlMs %v, cacheScope %v; want 90, private", ttl, scope)
	}
	if ttl, scope := hint(`{}`); ttl != nil || scope != nil {
		t.Errorf("a session-based client's page has a hint: %v %v", ttl, scope)
	}
	g2, _ := testGateway(tools.Policy{Allow: []string{"*"}}, gatewayServer{name: "c", src: &pagedPrompts{names: []string{"z"}, pageSize: 1}})
	res, _ = g2.listPrompts(context.Background(), json.RawMessage(`{"stateless":true}`))
	if m := res.(map[string]any); m["ttlMs"] != int64(0) {
		t.Errorf("a page without a hint: ttlMs %v, want 0", m["ttlMs"])
	}
}

// hintedServer reads every URI, with a 2026-07-28 server's cache hint.
type hintedServer struct{ resourceServer }

func (h *hintedServer) ReadResourceCached(_ context.Context, uri string) (downstream.Read, error) {
	ttl := int64(60000)
	return downstream.Read{Result: json.RawMessage(`{"contents":[{"uri":"` + uri + `","text":"t"}]}`), TTLMs: &ttl}, nil
}

// TestGatewayReadKeepsTheServersCacheHint: a 2026-07-28 client's
// resources/read of a server's resource carries the server's own ttlMs and
// cacheScope; a session-based client's result has none.
func TestGatewayReadKeepsTheServersCacheHint(t *testing.T) {
	g, _ := testGateway(tools.Policy{Allow: []string{"*"}}, gatewayServer{name: "a", src: &hintedServer{}})
	ctx := context.Background()
	res, err := g.readResource(ctx, json.RawMessage(`{"uri":"x://1","stateless":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res)
	if !strings.Contains(string(got), `"ttlMs":60000`) || !strings.Contains(string(got), `"cacheScope":"public"`) {
		t.Errorf("a 2026-07-28 read: %s, want the server's ttlMs 60000, public", got)
	}
	res, err = g.readResource(ctx, json.RawMessage(`{"uri":"x://1"}`))
	if got, _ := json.Marshal(res); err != nil || strings.Contains(string(got), "ttlMs") {
		t.Errorf("a session-based read: %s, %v", got, err)
	}
}
