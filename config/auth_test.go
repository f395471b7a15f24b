package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// twoTokens is a file with two [[auth.tokens]] entries, the second with
// its own limits table after its keys.
const twoTokens = `
[[auth.tokens]]
name = "ci"
token_env = "CI_TOKEN"
allow_tools = ["repo.*"]
deny_tools = ["repo.push"]

[[auth.tokens]]
name = "alice"
token_env = "ALICE_TOKEN"
rate = { calls_per_minute = 30 }

[auth.tokens.identity]
max_sessions = 2
`

func TestAuthTokensArrayOfTables(t *testing.T) {
	file := writeConfig(t, twoTokens)
	c, err := load(t, file, []string{"HOME=/nonexistent", "CI_TOKEN=ci-secret-1", "ALICE_TOKEN=alice-secret-2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Auth.Tokens) != 2 {
		t.Fatalf("tokens: %+v", c.Auth.Tokens)
	}
	ci, alice := c.Auth.Tokens[0], c.Auth.Tokens[1]
	if ci.Name != "ci" || ci.TokenEnv != "CI_TOKEN" || !slices.Equal(ci.AllowTools, []string{"repo.*"}) ||
		!slices.Equal(ci.DenyTools, []string{"repo.push"}) || ci.Identity.MaxSessions != 0 {
		t.Fatalf("ci: %+v", ci)
	}
	if alice.Name != "alice" || alice.Rate.CallsPerMinute != 30 || alice.Identity.MaxSessions != 2 {
		t.Fatalf("alice: the [auth.tokens.identity] after the second entry is that entry's: %+v", alice)
	}
}

func TestAuthTokensErrorsNameTheEntryAndLine(t *testing.T) {
	file := writeConfig(t, `
[[auth.tokens]]
name = "ci"
token_env = "CI_TOKEN"

[[auth.tokens]]
name = "alice"
token_env = "ALICE_TOKEN"
alow_tools = ["x"]
[auth.tokens.rate]
calls_per_minute = "many"
`)
	_, err := load(t, file, []string{"HOME=/nonexistent", "CI_TOKEN=a", "ALICE_TOKEN=b"})
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("want two problems, got %v", err)
	}
	for i, want := range []string{
		file + `:9: auth.tokens[2].alow_tools: unknown key (did you mean auth.tokens[2].allow_tools?)`,
		file + `:11: auth.tokens[2].rate.calls_per_minute = "many": want an integer, got a string`,
	} {
		if got := es[i].Error(); got != "config file "+want {
			t.Errorf("problem %d:\n got %s\nwant config file %s", i+1, got, want)
		}
	}
}

func TestAuthTokensKeySetTwiceInOneEntry(t *testing.T) {
	file := writeConfig(t, `
[[auth.tokens]]
name = "ci"
token_env = "CI_TOKEN"

[[auth.tokens]]
name = "alice"
name = "bob"
`)
	_, err := load(t, file, nil)
	if err == nil || !strings.Contains(err.Error(), ":8") || !strings.Contains(err.Error(), "set twice") {
		t.Fatalf("a key set twice within one entry must still be refused at its line: %v", err)
	}
}

func TestAuthTokensOnTheCommandLine(t *testing.T) {
	env := []string{"HOME=/nonexistent", "CI_TOKEN=abc"}
	c, err := load(t, "", env, `auth.tokens=[{name="ci", token_env="CI_TOKEN", allow_tools=["docs.*"]}]`)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Auth.Tokens) != 1 || c.Auth.Tokens[0].Name != "ci" || c.Auth.Tokens[0].AllowTools[0] != "docs.*" {
		t.Fatalf("-c auth.tokens=[…]: %+v", c.Auth.Tokens)
	}
	_, err = load(t, "", env, `auth.tokens.name=ci`)
	if err == nil || !strings.Contains(err.Error(), "want an array of tables, got a table") ||
		!strings.Contains(err.Error(), "auth.tokens=[{…}, {…}]") {
		t.Fatalf("-c auth.tokens.name must say to set the whole array: %v", err)
	}
}

func TestAuthTokensResolveFromTheEnvironment(t *testing.T) {
	file := writeConfig(t, twoTokens)
	c, err := load(t, file, []string{"HOME=/nonexistent", "CI_TOKEN=ci-secret-1", "ALICE_TOKEN=alice-secret-2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.Tokens[0].Token != "ci-secret-1" || c.Auth.Tokens[1].Token != "alice-secret-2" {
		t.Fatalf("tokens not resolved: %q %q", c.Auth.Tokens[0].Token, c.Auth.Tokens[1].Token)
	}
	for _, s := range []string{"ci-secret-1", "alice-secret-2"} {
		if !slices.Contains(c.Secrets, s) {
			t.Errorf("%s is not among the secrets to redact", s)
		}
	}
	out, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "secret") || !strings.Contains(string(out), `token_env = 'CI_TOKEN'`) {
		t.Fatalf("the effective config shows token_env, never the token:\n%s", out)
	}

	// Unset and empty: the variable and the token's name, never a value.
	_, err = load(t, file, []string{"HOME=/nonexistent", "ALICE_TOKEN="})
	want := []string{
		`:4: auth.tokens[1].token_env = "CI_TOKEN": the environment variable CI_TOKEN, which holds the token "ci", is not set or empty`,
		`:10: auth.tokens[2].token_env = "ALICE_TOKEN": the environment variable ALICE_TOKEN, which holds the token "alice", is not set or empty`,
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), file+w) {
			t.Errorf("want %q in:\n%v", w, err)
		}
	}
}

// TestAuthValidation checks each rule of [auth], [[auth.tokens]],
// [auth.oauth], http.public_url and the identity limits: the problem is
// named with its key and, in a file, its line.
func TestAuthValidation(t *testing.T) {
	env := []string{"HOME=/nonexistent", "A=token-a", "B=token-b", "SAME=token-a"}
	for _, tc := range []struct {
		name, file string
		overrides  []string
		want       string // "" = accepted
	}{
		{name: "a name is required", file: "[[auth.tokens]]\ntoken_env = \"A\"\n",
			want: ":1: auth.tokens[1].name: is required: the token's name"},
		{name: "a name is plain", file: "[[auth.tokens]]\nname = \"c i\"\ntoken_env = \"A\"\n",
			want: `:2: auth.tokens[1].name: must be 1 to 64 of A-Z a-z 0-9 . _ -, got "c i"`},
		{name: "a name is at most 64", file: "[[auth.tokens]]\nname = \"" + strings.Repeat("x", 65) + "\"\ntoken_env = \"A\"\n",
			want: ":2: auth.tokens[1].name"},
		{name: "names are unique", file: "[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"A\"\n[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"B\"\n",
			want: `:5: auth.tokens[2].name: the name "ci" is already auth.tokens[1].name's`},
		{name: "token_env is required", file: "[[auth.tokens]]\nname = \"ci\"\n",
			want: ":1: auth.tokens[1].token_env: is required"},
		{name: "token_env is a variable name", file: "[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"$A\"\n",
			want: `:3: auth.tokens[1].token_env: must be an environment variable name such as CI_TOKEN, got "$A"`},
		{name: "two tokens with one value", file: "[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"A\"\n[[auth.tokens]]\nname = \"bot\"\ntoken_env = \"SAME\"\n",
			want: `:6: auth.tokens[2].token_env = "SAME": the token "bot" has the same value as the token "ci"`},
		{name: "default is the bearer token's name", file: "[http.auth]\nbearer_token = \"${B}\"\n[[auth.tokens]]\nname = \"default\"\ntoken_env = \"A\"\n",
			want: `:4: auth.tokens[1].name: "default" is the name of http.auth.bearer_token`},
		{name: "default is free without a bearer token", file: "[[auth.tokens]]\nname = \"default\"\ntoken_env = \"A\"\n"},
		{name: "the bearer token's value", file: "[http.auth]\nbearer_token = \"${A}\"\n[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"A\"\n",
			want: `auth.tokens[1].token_env = "A": the token "ci" has the same value as the token "default"`},
		{name: "allow_tools globs", file: "[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"A\"\nallow_tools = [\"repo.[\"]\n",
			want: `:4: auth.tokens[1].allow_tools = ["repo.["]: "repo.[" is not a valid glob`},
		{name: "deny_tools globs", file: "[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"A\"\ndeny_tools = [\"\"]\n",
			want: `:4: auth.tokens[1].deny_tools = [""]: "" is not a valid glob`},
		{name: "a token's limits", file: "[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"A\"\n[auth.tokens.identity]\nmax_sessions = -1\n",
			want: `:5: auth.tokens[1].identity.max_sessions: must not be negative (0 = no bound), got -1`},
		{name: "a token's tool limits", file: "[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"A\"\nrate = { tools = { \"a[\" = 3 } }\n",
			want: `:4: auth.tokens[1].rate.tools: "a[" is not a valid glob over tool names`},
		{name: "calls_per_minute", file: "[limits.rate]\ncalls_per_minute = -5\n",
			want: `:2: limits.rate.calls_per_minute: must not be negative (0 = no bound), got -5`},
		{name: "rate tools globs", file: "[limits.rate.tools]\n\"[x\" = 5\n",
			want: `:2: limits.rate.tools: "[x" is not a valid glob`},
		{name: "rate tools values", file: "[limits.rate.tools]\n\"repo.*\" = -1\n",
			want: `:2: limits.rate.tools."repo.*": must not be negative`},
		{name: "max_concurrent_calls", overrides: []string{"limits.identity.max_concurrent_calls=-2"},
			want: `-c limits.identity.max_concurrent_calls=-2: limits.identity.max_concurrent_calls: must not be negative`},
		{name: "limits accepted", file: "[limits.rate]\ncalls_per_minute = 60\n[limits.rate.tools]\n\"repo.*\" = 10\n[limits.identity]\nmax_concurrent_calls = 4\nmax_sessions = 2\n"},
		{name: "issuer https", file: "[auth.oauth]\nissuer = \"http://id.example.com\"\n",
			want: `:2: auth.oauth.issuer: must be https:// (http:// only on a loopback host such as 127.0.0.1 or localhost), got "http://id.example.com"`},
		{name: "issuer http on 127.0.0.1", file: "[auth.oauth]\nissuer = \"http://127.0.0.1:9000/oidc\"\n"},
		{name: "issuer http on 127.1.2.3", file: "[auth.oauth]\nissuer = \"http://127.1.2.3:9000\"\n"},
		{name: "issuer http on ::1", file: "[auth.oauth]\nissuer = \"http://[::1]:9000\"\n"},
		{name: "issuer http on localhost", file: "[auth.oauth]\nissuer = \"http://localhost:9000\"\n"},
		{name: "issuer https elsewhere", file: "[auth.oauth]\nissuer = \"https://id.example.com/realms/main\"\n"},
		{name: "issuer absolute", file: "[auth.oauth]\nissuer = \"id.example.com\"\n",
			want: `:2: auth.oauth.issuer: must be the authorization server's absolute URL`},
		{name: "issuer needed", file: "[auth.oauth]\nrequired_scopes = [\"mcp\"]\n",
			want: `:1: auth.oauth.issuer: is required: [auth.oauth] sets other keys`},
		{name: "audience absolute", file: "[auth.oauth]\nissuer = \"https://id.example.com\"\naudience = \"mcp\"\n",
			want: `:3: auth.oauth.audience: must be an absolute URI without fragment (RFC 8707's resource, such as https://mcp.example.com/mcp), got "mcp"`},
		{name: "leeway at most 5m", file: "[auth.oauth]\nissuer = \"https://id.example.com\"\nleeway = \"6m\"\n",
			want: `:3: auth.oauth.leeway: must be from 0s to 5m, got 6m0s`},
		{name: "leeway not negative", overrides: []string{`auth.oauth.leeway="-1s"`},
			want: `-c auth.oauth.leeway="-1s": auth.oauth.leeway: must be from 0s to 5m, got -1s`},
		{name: "subject_claim", overrides: []string{`auth.oauth.subject_claim=""`},
			want: `auth.oauth.subject_claim = "": must name a claim`},
		{name: "scopes", file: "[auth.oauth]\nissuer = \"https://id.example.com\"\nrequired_scopes = [\"a b\"]\n[auth.oauth.scopes]\n\"mcp:read\" = [\"repo.[\"]\n",
			want: `:3: auth.oauth.required_scopes = ["a b"]: "a b" is not a scope`},
		{name: "scope globs", file: "[auth.oauth]\nissuer = \"https://id.example.com\"\n[auth.oauth.scopes]\n\"mcp:read\" = [\"repo.[\"]\n",
			want: `:4: auth.oauth.scopes."mcp:read" = ["repo.["]: "repo.[" is not a valid glob`},
		{name: "public_url absolute", file: "[http]\npublic_url = \"mcp.example.com/mcp\"\n",
			want: `:2: http.public_url: must be the MCP endpoint's absolute http(s) URL, with a path and no user, query or fragment, such as https://mcp.example.com/mcp, got "mcp.example.com/mcp"`},
		{name: "public_url without query", overrides: []string{`http.public_url="https://mcp.example.com/mcp?x=1"`},
			want: `http.public_url: must be the MCP endpoint's absolute http(s) URL`},
		{name: "public_url required off loopback", file: "[http]\nlisten = \"0.0.0.0:8080\"\n[auth.oauth]\nissuer = \"https://id.example.com\"\n",
			want: `:4: http.public_url: is required with [auth.oauth] when http.listen (0.0.0.0:8080) is not loopback`},
		{name: "public_url not required on loopback", file: "[http]\nlisten = \"127.0.0.1:8080\"\n[auth.oauth]\nissuer = \"https://id.example.com\"\n"},
		{name: "public_url given", file: "[http]\nlisten = \":8080\"\npublic_url = \"https://mcp.example.com/mcp\"\n[auth.oauth]\nissuer = \"https://id.example.com\"\n"},
		{name: "operators are known names", file: "[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"A\"\n[auth]\noperators = [\"ops\"]\n",
			want: `:5: auth.operators = ["ops"]: "ops" is neither a token's name (known: "ci") nor scope:<scope>`},
		{name: "operators default", file: "[http.auth]\nbearer_token = \"${A}\"\n[auth]\noperators = [\"default\"]\n"},
		{name: "operators scope needs oauth", file: "[auth]\noperators = [\"scope:mcp:admin\"]\n",
			want: `:2: auth.operators = ["scope:mcp:admin"]: "scope:mcp:admin" names an OAuth scope, but [auth.oauth] has no issuer`},
		{name: "operators scope", file: "[auth]\noperators = [\"scope:mcp:admin\"]\n[auth.oauth]\nissuer = \"https://id.example.com\"\n"},
		{name: "operators empty scope", file: "[auth]\noperators = [\"scope:\"]\n[auth.oauth]\nissuer = \"https://id.example.com\"\n",
			want: `:2: auth.operators = ["scope:"]: "scope:": write scope:<scope>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = writeConfig(t, tc.file)
			}
			_, err := load(t, file, env, tc.overrides...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("accepted; want %q", tc.want)
			case strings.HasPrefix(tc.want, ":") && !strings.Contains(err.Error(), "config file "+file+tc.want):
				t.Fatalf("want %q after the file's name in:\n%v", tc.want, err)
			case !strings.Contains(err.Error(), tc.want):
				t.Fatalf("want %q in:\n%v", tc.want, err)
			}
		})
	}
}

func TestAuthClusterNeedsPublicURLWithOAuth(t *testing.T) {
	file := writeConfig(t, `
[auth.oauth]
issuer = "https://id.example.com"
[cluster]
provider = "etcd"
listen = "127.0.0.1:7000"
etcd_endpoints = ["127.0.0.1:2379"]
tls_insecure = true
[approvals]
state_key = "`+strings.Repeat("ab", 32)+`"
[http]
listen = "127.0.0.1:8080"
`)
	_, err := load(t, file, nil)
	if err == nil || !strings.Contains(err.Error(), "http.public_url: is required with [auth.oauth] in a cluster") {
		t.Fatalf("a cluster with OAuth needs http.public_url: %v", err)
	}
}

func TestCheckBearerFlag(t *testing.T) {
	file := writeConfig(t, "[[auth.tokens]]\nname = \"default\"\ntoken_env = \"A\"\n[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"B\"\n")
	c, err := load(t, file, []string{"HOME=/nonexistent", "A=token-a", "B=token-b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckBearerFlag("--bearer-token-env T", "other"); err == nil ||
		err.Error() != `--bearer-token-env T is the token named "default", and auth.tokens[1].name is named so too: name that token otherwise` {
		t.Fatalf("an entry named default beside the flag: %v", err)
	}
	c.Auth.Tokens = c.Auth.Tokens[1:]
	if err := c.CheckBearerFlag("--bearer-token-env T", "token-b"); err == nil || !strings.Contains(err.Error(), `same value as the token "ci"`) {
		t.Fatalf("the flag's token equal to an entry's: %v", err)
	}
	if err := c.CheckBearerFlag("--bearer-token-env T", "other"); err != nil {
		t.Fatal(err)
	}
}
