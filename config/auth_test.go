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
