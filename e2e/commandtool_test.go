package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// commandToolConfig declares command tools: greet (echo, argv from a
// placeholder), report (structured JSON output checked against its
// output_schema) and fail (exits non-zero).
const commandToolConfig = `
[mcp.greet]
command = "echo"
args = ["hello", "{name}"]
description = "Greets someone."
input_schema = { type = "object", properties = { name = { type = "string" } }, required = ["name"], additionalProperties = false }
side_effects = []
requires_approval = false

[mcp.report]
command = "sh"
args = ["-c", "printf '{{\"ok\":true,\"n\":3}}'"] # literal braces are doubled
description = "Reports."
output_schema = { type = "object", properties = { ok = { type = "boolean" }, n = { type = "integer" } }, required = ["ok", "n"] }
side_effects = []

[mcp.fail]
command = "sh"
args = ["-c", "echo broken >&2; exit 3"]
description = "Always fails."
side_effects = []
`

// commandToolChecks is what a client must see of the tools above.
func commandToolChecks() []check {
	return []check{
		{"tools/list shows the command tools", listTools(), func(t *testing.T, got stepResult) {
			var r struct {
				Tools []struct {
					Name string         `json:"name"`
					Meta map[string]any `json:"_meta"`
				} `json:"tools"`
			}
			decodeResult(t, got, &r)
			found := map[string]map[string]any{}
			for _, tl := range r.Tools {
				found[tl.Name] = tl.Meta
			}
			for _, name := range []string{"greet", "report", "fail", "repo.readFile"} {
				if _, ok := found[name]; !ok {
					t.Fatalf("tool %s missing from %v", name, found)
				}
			}
			if found["greet"]["dev.troupe/requires_approval"] != false || found["report"]["dev.troupe/requires_approval"] != true {
				t.Errorf("requires_approval in _meta: greet %v, report %v", found["greet"], found["report"])
			}
		}},
		{"greet runs echo with the argument as one argv element", callTool("greet", map[string]any{"name": "a; rm -rf $HOME"}), func(t *testing.T, got stepResult) {
			r := decodeCall(t, got)
			if r.IsError || r.text() != "hello a; rm -rf $HOME\n" {
				t.Fatalf("greet: %+v", r)
			}
		}},
		{"report returns structured content", callTool("report", map[string]any{}), func(t *testing.T, got stepResult) {
			var out struct {
				OK bool `json:"ok"`
				N  int  `json:"n"`
			}
			decodeStructured(t, got, &out)
			if !out.OK || out.N != 3 {
				t.Fatalf("report: %+v", out)
			}
		}},
		{"fail is an error with exit code and stderr", callTool("fail", map[string]any{}), func(t *testing.T, got stepResult) {
			text := toolError(t, got)
			wantMention(t, text, "3")
			wantMention(t, text, "broken")
			wantMention(t, text, "command_failed")
		}},
		{"greet validates its arguments", callTool("greet", map[string]any{}), func(t *testing.T, got stepResult) {
			wantMention(t, toolError(t, got), "name")
		}},
	}
}

func writeCommandToolConfig(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(file, []byte(commandToolConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestTSClientCommandToolsStdio(t *testing.T) {
	requireRunner(t)
	fx := newFixture(t)
	tr := stdioTransport(t, fx.dir)
	tr.Args = append(tr.Args, "--config", writeCommandToolConfig(t))
	runChecks(t, tr, commandToolChecks(), approveOnce, approveOnce)
}

// approveOnce is a person approving one call (report and fail need
// approval: command tools ask by default).
var approveOnce = map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}

func TestTSClientCommandToolsHTTP(t *testing.T) {
	requireRunner(t)
	fx := newFixture(t)
	t.Setenv("TROUPE_CONFIG", writeCommandToolConfig(t)) // the server inherits it
	srv := startHTTPServer(t, fx.dir, "")
	runChecks(t, srv.transport(), commandToolChecks(), approveOnce, approveOnce)
	if strings.Contains(srv.log.String(), "DATA RACE") {
		t.Fatal("data race in the server")
	}
}
