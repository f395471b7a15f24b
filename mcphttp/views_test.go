package mcphttp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"troupe/auth"
	"troupe/identity"
	"troupe/protocol"
	"troupe/tools"
)

// otherTool answers at once, as echo does.
var otherTool = funcTool{name: "other", call: func(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
	return textResult("other"), nil
}}

// grantRig serves echo and other to alice (echo only) and bob (everything
// but echo).
func grantRig(t *testing.T) *rig {
	t.Helper()
	chain := &auth.Chain{Tokens: auth.NewTokens([]auth.StaticToken{
		{Name: "alice", Token: "alice-secret", Tools: &identity.Grant{Allow: []string{"echo"}}},
		{Name: "bob", Token: "bob-secret", Tools: &identity.Grant{Allow: []string{"*"}, Deny: []string{"echo"}}},
	})}
	return newRig(t, rigConfig{opts: Options{Auth: chain}, tools: []tools.Tool{echoTool(), otherTool}})
}

// listedTools is the names of a tools/list result and its cacheScope.
func listedTools(t *testing.T, body []byte) ([]string, string) {
	t.Helper()
	m := decode(t, body)
	if m.Error != nil {
		t.Fatalf("tools/list failed: %s", body)
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Scope string `json:"cacheScope"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names, res.Scope
}

// callText is the text of a tools/call result and whether it is an error,
// with the tool's name taken out (so two refusals can be compared).
func callText(t *testing.T, body []byte, name string) (string, bool) {
	t.Helper()
	m := decode(t, body)
	if m.Error != nil {
		return strings.ReplaceAll(m.Error.Message, name, "NAME"), true
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("tools/call result: %s", body)
	}
	text := strings.ReplaceAll(res.Content[0].Text, name, "NAME")
	if i := strings.Index(text, "correlation"); i >= 0 {
		text = text[:i]
	}
	return text, res.IsError
}

// TestToolsPerIdentity: each identity lists only the tools its grant
// allows, and a call of another tool is answered as an unknown tool's,
// in both eras; a list that depends on the caller is private in
// 2026-07-28.
func TestToolsPerIdentity(t *testing.T) {
	r := grantRig(t)
	for _, tc := range []struct {
		token        string
		list         []string
		allowed, not string
	}{
		{"alice-secret", []string{"echo"}, "echo", "other"},
		{"bob-secret", []string{"other"}, "other", "echo"},
	} {
		r.token = tc.token
		// Session-based.
		id := r.initialize("2025-06-18")
		_, body := r.post(id, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if names, _ := listedTools(t, body); !slices.Equal(names, tc.list) {
			t.Errorf("%s: tools/list %q, want %q", tc.token, names, tc.list)
		}
		call := func(name string) []byte {
			_, body := r.post(id, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, name))
			return body
		}
		if text, isErr := callText(t, call(tc.allowed), tc.allowed); isErr {
			t.Errorf("%s: %s refused: %s", tc.token, tc.allowed, text)
		}
		hidden, hiddenErr := callText(t, call(tc.not), tc.not)
		unknown, unknownErr := callText(t, call("nosuch"), "nosuch")
		if !hiddenErr || hidden != unknown || hiddenErr != unknownErr {
			t.Errorf("%s: a call of %s answered %q (error %v), an unknown tool %q (error %v)", tc.token, tc.not, hidden, hiddenErr, unknown, unknownErr)
		}

		// 2026-07-28.
		_, body = r.post("", modernBody(3, "tools/list", ""), modernHeaders("tools/list", "")...)
		if names, scope := listedTools(t, body); !slices.Equal(names, tc.list) || scope != "private" {
			t.Errorf("%s: 2026-07-28 tools/list %q cacheScope %q, want %q private", tc.token, names, scope, tc.list)
		}
		mcall := func(name string) []byte {
			_, body := r.post("", fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":%q,"arguments":{},%s}}`,
				name, modernMeta("2026-07-28", "")), modernHeaders("tools/call", name)...)
			return body
		}
		if text, isErr := callText(t, mcall(tc.allowed), tc.allowed); isErr {
			t.Errorf("%s: 2026-07-28 %s refused: %s", tc.token, tc.allowed, text)
		}
		hidden, hiddenErr = callText(t, mcall(tc.not), tc.not)
		unknown, unknownErr = callText(t, mcall("nosuch"), "nosuch")
		if !hiddenErr || hidden != unknown || hiddenErr != unknownErr {
			t.Errorf("%s: 2026-07-28 call of %s answered %q, an unknown tool %q", tc.token, tc.not, hidden, unknown)
		}
		_, body = r.post("", modernBody(5, "server/discover", ""), modernHeaders("server/discover", "")...)
		var disc struct {
			Instructions string `json:"instructions"`
			Scope        string `json:"cacheScope"`
		}
		if err := json.Unmarshal(decode(t, body).Result, &disc); err != nil || disc.Scope != "private" ||
			strings.Contains(disc.Instructions, tc.not) {
			t.Errorf("%s: server/discover names a tool it may not use or is not private: %s", tc.token, body)
		}
	}
}

// EndSessionsOf ends the sessions, and the pooled 2026-07-28 sessions, of
// the identities it is given, and no others (what a reload that removes a
// token does).
func TestEndSessionsOf(t *testing.T) {
	r := grantRig(t)
	r.token = "alice-secret"
	alice := r.initialize("2025-06-18")
	r.post("", modernBody(1, "tools/list", ""), modernHeaders("tools/list", "")...) // leaves a pooled session
	r.token = "bob-secret"
	bob := r.initialize("2025-06-18")
	r.post("", modernBody(1, "tools/list", ""), modernHeaders("tools/list", "")...)
	aliceHandle := r.session(alice)

	n := r.h.EndSessionsOf(func(who *identity.Identity) bool { return who.Kind == identity.Token && who.Name == "alice" })
	if n != 2 {
		t.Errorf("ended %d sessions, want alice's two (one pooled)", n)
	}
	select {
	case <-aliceHandle.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("alice's session did not end")
	}
	if r.session(bob) == nil || r.session(bob).Ended() {
		t.Fatal("bob's session ended too")
	}
	_, body := r.post(bob, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if decode(t, body).Error != nil {
		t.Fatalf("bob's session after alice's ended: %s", body)
	}
	r.token = "alice-secret"
	if resp, _ := r.post(alice, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.StatusCode != 404 {
		t.Fatalf("alice's ended session answered %d, want 404", resp.StatusCode)
	}
}
