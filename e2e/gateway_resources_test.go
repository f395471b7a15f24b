package e2e

// server-everything's resources through troupe: the lists are troupe's own
// (troupe://output/…) followed by the server's, unchanged; resources/read
// of a listed URI, of a template's URI (text and blob) and of a URI nobody
// has answers as the server does (binary contents byte for byte).

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// everythingResourceSteps are the resource requests.
func everythingResourceSteps() []step {
	return []step{
		{Op: "listResources"},
		{Op: "listResourceTemplates"},
		{Op: "readResource", URI: "demo://resource/static/document/architecture.md"},
		{Op: "readResource", URI: "demo://resource/dynamic/text/3"},
		{Op: "readResource", URI: "demo://resource/dynamic/blob/5"},
		{Op: "readResource", URI: "demo://nowhere/1"}, // the server's own error
	}
}

// entriesWithout is the entries under key of a list result, less those
// whose field has prefix (troupe's own).
func entriesWithout(t *testing.T, raw json.RawMessage, key, field, prefix string) string {
	t.Helper()
	var r map[string][]map[string]any
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %s", key, raw)
	}
	var keep []map[string]any
	for _, e := range r[key] {
		if v, _ := e[field].(string); len(v) >= len(prefix) && v[:len(prefix)] == prefix {
			continue
		}
		keep = append(keep, e)
	}
	b, _ := json.Marshal(keep)
	return string(b)
}

func resourcesThroughTroupe(t *testing.T, table string) {
	requireDownstream(t)
	steps := everythingResourceSteps()
	via := throughTroupe(t, downstreamConfig(t, table), steps)
	command, args := everythingStdioCommand(t)
	direct := runScenario(t, scenario{Transport: transport{Kind: "stdio", Command: command, Args: args}, Steps: steps})
	if len(via.Steps) != len(steps) || len(direct.Steps) != len(steps) {
		t.Fatalf("steps: %d through troupe, %d directly", len(via.Steps), len(direct.Steps))
	}
	for i, key := range []string{"resources", "resourceTemplates"} {
		field := map[string]string{"resources": "uri", "resourceTemplates": "uriTemplate"}[key]
		if !via.Steps[i].OK {
			t.Fatalf("%s through troupe: %v", key, via.Steps[i])
		}
		got := entriesWithout(t, via.Steps[i].Result, key, field, "troupe://output/")
		want := entriesWithout(t, direct.Steps[i].Result, key, field, "troupe://output/")
		if !jsonEqual(got, want) {
			t.Errorf("%s differ but for troupe's own:\n via    %s\n direct %s", key, got, want)
		}
	}
	if want := `"uriTemplate":"troupe://output/`; !contains(string(via.Steps[1].Result), want) {
		t.Errorf("troupe's own output template is not listed: %s", via.Steps[1].Result)
	}
	for i := 2; i < len(steps); i++ {
		x, y := via.Steps[i], direct.Steps[i]
		x.Result, y.Result = withoutClock(t, x.Result), withoutClock(t, y.Result)
		if x.OK != y.OK || (x.OK && !jsonEqual(string(x.Result), string(y.Result))) || (!x.OK && x.String() != y.String()) {
			t.Errorf("resources/read %s differs:\n via    %v\n direct %v", steps[i].URI, x, y)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestGatewayResourcesStdio(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	resourcesThroughTroupe(t, stdioServerTable("everything", command, args, "requires_approval = false"))
}

func TestGatewayResourcesHTTP(t *testing.T) {
	requireDownstream(t)
	endpoint := startEverythingHTTP(t)
	resourcesThroughTroupe(t, fmt.Sprintf("[mcp_servers.everything]\nurl = %q\nrequires_approval = false\n", endpoint))
}

// TestGatewayResourcesPolicy: [resources] deny (globs over URIs, a *
// spanning "/") hides a server's resources and templates from the lists,
// and reading or subscribing to one is answered as for a URI nobody has:
// -32602 for a 2026-07-28 client, -32002 in a session.
func TestGatewayResourcesPolicy(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	cfg := downstreamConfig(t, "[resources]\nallow = [\"demo://*\"]\ndeny = [\"demo://resource/static/document/arch*\", \"demo://resource/dynamic/blob/*\"]\n\n"+
		stdioServerTable("everything", command, args, "requires_approval = false"))
	fx := newFixture(t)
	s := startServer(t, fx.dir, "--config", cfg)

	s.send(modernRequest("1", "resources/list", ""))
	listed, _ := json.Marshal(checkModernResult(t, "resources/list", s.recv()))
	if contains(string(listed), "architecture.md") || !contains(string(listed), "demo://resource/static/document/") {
		t.Errorf("resources/list: want the static documents but architecture.md: %s", listed)
	}
	s.send(modernRequest("2", "resources/templates/list", ""))
	templates, _ := json.Marshal(checkModernResult(t, "resources/templates/list", s.recv()))
	if contains(string(templates), "dynamic/blob") || !contains(string(templates), "dynamic/text/{") {
		t.Errorf("resources/templates/list: want the text template only: %s", templates)
	}
	for i, uri := range []string{"demo://resource/static/document/architecture.md", "demo://resource/dynamic/blob/5"} {
		s.send(modernRequest(fmt.Sprint(10+i), "resources/read", `"uri":"`+uri+`"`))
		if code, _ := errorCode(t, s.recv()); code != -32602 {
			t.Errorf("reading denied %s: code %v, want -32602", uri, code)
		}
	}
	s.send(modernRequest("3", "resources/read", `"uri":"demo://resource/dynamic/text/3"`))
	checkModernResult(t, "resources/read", s.recv())

	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	s.recv()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"demo://resource/dynamic/blob/5"}}`)
	if code, _ := errorCode(t, s.recv()); code != -32002 {
		t.Errorf("subscribing to a denied URI: code %v, want -32002", code)
	}
}
