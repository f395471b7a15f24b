package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// codexTokenEnv holds the named token "codex": troupe reads it through
// [[auth.tokens]] token_env, Codex through bearer_token_env_var.
const codexTokenEnv = "TROUPE_CODEX_TOKEN"

// TestCodexWithANamedToken runs the real Codex CLI against `troupe serve
// --http` whose only credential is the named static token "codex"
// ([[auth.tokens]] with token_env), configured in Codex as README says
// (bearer_token_env_var). Codex lists troupe's tools and calls one; the
// audit record of the call names the identity token:codex, never the
// token; a wrong token is refused with 401.
func TestCodexWithANamedToken(t *testing.T) {
	codexBinary(t) // skip before building and starting servers
	fx := newFixture(t)
	token := newToken(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`[audit]
path = %q

[[auth.tokens]]
name = "codex"
token_env = %q
`, audit, codexTokenEnv)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(codexTokenEnv, token) // troupe's environment, as a user would export it
	srv := startHTTPServer(t, fx.dir, "", "--config", cfg)

	if a := modernToolsList(t, srv.url, "Bearer "+newToken(t)); a.status != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d %s, want 401", a.status, a.brief())
	}
	if a := modernToolsList(t, srv.url, ""); a.status != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s, want 401", a.status, a.brief())
	}

	servers := fmt.Sprintf("[mcp_servers.troupe]\nurl = %q\nbearer_token_env_var = %q\n", srv.url, codexTokenEnv)
	run := runCodexCalls(t, fx.dir, servers, []codexCall{
		{"call_read", "repo_readFile", map[string]any{"path": "README.md"}},
	}, nil, codexTokenEnv+"="+token)
	content, _ := json.Marshal(fx.readme)
	if out := run.output(t, "call_read"); !strings.Contains(out, `"content":`+string(content)) {
		t.Fatalf("repo.readFile through Codex with the named token: Codex handed back:\n%s", out)
	}

	// The call's audit record says who called, by the token's name.
	f, err := os.Open(audit)
	if err != nil {
		t.Fatalf("the audit log: %v", err)
	}
	defer f.Close()
	var identities []any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), token) {
			t.Errorf("the audit log holds the token: %s", sc.Text())
		}
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("an audit line is not JSON: %s", sc.Text())
		}
		if rec["tool"] == "repo.readFile" {
			identities = append(identities, rec["identity"])
		}
	}
	if len(identities) == 0 {
		t.Fatalf("no audit record of Codex's repo.readFile")
	}
	for _, id := range identities {
		if id != "token:codex" {
			t.Errorf("the audit record of Codex's call names identity %v, want token:codex", id)
		}
	}
	if strings.Contains(srv.log.String(), token) {
		t.Errorf("troupe's log holds the token")
	}
}
