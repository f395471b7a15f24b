package app

import (
	"testing"

	"troupe/config"
)

// Operators: none named keeps every valid caller an operator (as before
// identities); else token names, and OAuth scopes after "scope:", only.
func TestOperators(t *testing.T) {
	for _, tc := range []struct {
		operators []string
		name      string
		scopes    []string
		want      bool
	}{
		{nil, "alice", nil, true},
		{nil, "", []string{"mcp:read"}, true},
		{[]string{"ops"}, "ops", nil, true},
		{[]string{"ops"}, "alice", nil, false},
		{[]string{"ops", "scope:troupe:admin"}, "", []string{"mcp:read", "troupe:admin"}, true},
		{[]string{"ops", "scope:troupe:admin"}, "", []string{"mcp:read"}, false},
		{[]string{"scope:ops"}, "ops", nil, false}, // a token named like a scope is not that scope
		{[]string{"ops"}, "", []string{"ops"}, false}, // nor a scope named like a token
	} {
		if got := operator(tc.operators, tc.name, tc.scopes); got != tc.want {
			t.Errorf("operators %q, name %q, scopes %q: %v, want %v", tc.operators, tc.name, tc.scopes, got, tc.want)
		}
	}
	cfg := &config.Config{}
	cfg.Auth.Operators = []string{"ops"}
	cfg.Auth.Tokens = []config.AuthToken{{Name: "ops", Token: "a"}, {Name: "alice", Token: "b"}}
	for _, s := range staticTokens(cfg) {
		if s.Operator != (s.Name == "ops") {
			t.Errorf("token %s: operator %v", s.Name, s.Operator)
		}
	}
}
