package mcphttp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"troupe/protocol"
	"troupe/tools"
)

// TestModernNameCheckedIsNameUsed: 2026-07-28's Mcp-Name header is
// compared with the tool name the session decodes and runs, not with a
// second reading of the body. A body that names one tool in "name" and
// another in "NAME" is refused before anything reads it; a body whose only
// name is "NAME" (which the session reads as the name) is checked against
// that name, so an empty header value cannot let it through.
func TestModernNameCheckedIsNameUsed(t *testing.T) {
	var secretRuns atomic.Int32
	secret := funcTool{name: "secret", call: func(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
		secretRuns.Add(1)
		return textResult("secret ran"), nil
	}}
	r := newRig(t, rigConfig{tools: []tools.Tool{echoTool(), secret}})
	call := func(params string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{%s,%s}}`, params, modernMeta("2026-07-28", ""))
	}
	const empty = "=?base64??=" // the header's encoding of ""
	for _, tc := range []struct {
		name, params, header string
		code                 int64
		mention              string
	}{
		{"name and NAME", `"name":"echo","NAME":"secret"`, "echo", -32602, `duplicate member "name" (also as "NAME")`},
		{"name twice", `"name":"echo","name":"secret"`, "echo", -32602, `duplicate member "name"`},
		{"NAME alone, empty header", `"NAME":"secret"`, empty, -32020, `'' does not match body value 'secret'`},
		{"NAME alone, other header", `"NAME":"secret"`, "echo", -32020, `'echo' does not match body value 'secret'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := r.post("", call(tc.params), modernHeaders("tools/call", tc.header)...)
			m := decode(t, body)
			if resp.StatusCode != http.StatusBadRequest || m.Error == nil || m.Error.Code != tc.code ||
				!strings.Contains(m.Error.Message, tc.mention) || string(m.ID) != "7" {
				t.Fatalf("got %d %s; want 400, %d mentioning %q", resp.StatusCode, body, tc.code, tc.mention)
			}
		})
	}
	if n := secretRuns.Load(); n != 0 {
		t.Fatalf("secret ran %d times", n)
	}
	// The header and the name the session reads agree: the call runs.
	resp, body := r.post("", call(`"Name":"secret"`), modernHeaders("tools/call", "secret")...)
	if got := toolText(t, decode(t, body)); resp.StatusCode != 200 || got != "secret ran" {
		t.Fatalf("Name with a matching header: %d %s", resp.StatusCode, body)
	}

	// resources/read: the same for uri.
	read := func(params string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{%s,%s}}`, params, modernMeta("2026-07-28", ""))
	}
	for _, tc := range []struct {
		params, header string
		code           int64
	}{
		{`"uri":"troupe://output/a/stdout","URI":"troupe://output/b/stdout"`, "troupe://output/a/stdout", -32602},
		{`"URI":"troupe://output/b/stdout"`, empty, -32020},
	} {
		resp, body := r.post("", read(tc.params), modernHeaders("resources/read", tc.header)...)
		if m := decode(t, body); resp.StatusCode != http.StatusBadRequest || m.Error == nil || m.Error.Code != tc.code {
			t.Errorf("resources/read %s with Mcp-Name %q: %d %s; want 400, %d", tc.params, tc.header, resp.StatusCode, body, tc.code)
		}
	}
}
