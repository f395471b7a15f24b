package overrides

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"troupe/redact"
	"troupe/workspace"
)

// params is initialize's params with session as _meta."dev.troupe/session".
// params is initialize's _meta setting the session's own settings.
func params(t *testing.T, session any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]any{MetaKey: session})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func workspaceWithSub(t *testing.T) *workspace.Root {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// What a session may set is read and checked in one place: nothing asked
// is nil, what the policy does not allow is refused in words that say how
// to allow it, and what it allows comes back clean.
func TestParse(t *testing.T) {
	ws := workspaceWithSub(t)
	allow := Policy{Allow: true, Env: []string{"A", "B"}, Workspace: ws}
	if o, err := Parse(nil, allow); o != nil || err != nil {
		t.Fatalf("no params: %v, %v", o, err)
	}
	if o, err := Parse(params(t, map[string]any{}), Policy{}); o != nil || err != nil {
		t.Fatalf("an empty request, even where nothing is allowed: %v, %v", o, err)
	}
	refusals := []struct {
		session any
		policy  Policy
		want    string
	}{
		{map[string]any{"cwd": "sub"}, Policy{}, "allow_overrides = true"},
		{map[string]any{"env": map[string]any{"C": "x"}}, allow, `"C" is not a variable sessions may set (allowed: A, B;`},
		{map[string]any{"env": map[string]any{"A": "x\x00y"}}, allow, "contains a NUL character"},
		{map[string]any{"cwd": "../.."}, allow, `.cwd "../.."`},
		{map[string]any{"cwd": 3}, allow, `must be an object with "cwd" (a string)`},
		{map[string]any{"shell": "x"}, allow, `must be an object`},
	}
	for _, r := range refusals {
		_, err := Parse(params(t, r.session), r.policy)
		if err == nil || !strings.Contains(err.Error(), r.want) || !strings.Contains(err.Error(), MetaKey) {
			t.Errorf("%v: %v, want an error naming %s with %q", r.session, err, MetaKey, r.want)
		}
	}
	o, err := Parse(params(t, map[string]any{"cwd": "sub/./deeper", "env": map[string]any{"B": "2", "A": "1"}}), allow)
	if err != nil || o.Cwd != "sub/deeper" || o.Env["A"] != "1" || o.Env["B"] != "2" {
		t.Fatalf("allowed settings: %+v, %v", o, err)
	}
	if names := EnvNames(o); !slices.Equal(names, []string{"A", "B"}) {
		t.Fatalf("EnvNames = %v", names)
	}
	m := Meta(o, allow)
	if m["cwd"] != "sub/deeper" || m["overrides"] != true || m["env"].(map[string]string)["A"] != redact.Mask {
		t.Fatalf("Meta shows %v", m)
	}
	if m := Meta(nil, Policy{}); m["cwd"] != "." || m["allowed"] != false || m["allowed_env"] != nil {
		t.Fatalf("Meta of a session that set nothing: %v", m)
	}
}
