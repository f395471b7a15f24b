package app

import (
	"testing"

	"troupe/config"
)

// Operators: none named keeps every token an operator (as before
// identities); else the token names it lists (its scope: entries are the
// OAuth validator's).
func TestOperators(t *testing.T) {
	for _, tc := range []struct {
		operators []string
		name      string
		want      bool
	}{
		{nil, "alice", true},
		{[]string{"ops"}, "ops", true},
		{[]string{"ops"}, "alice", false},
		{[]string{"scope:ops"}, "ops", false}, // a token named like a scope is not that scope
	} {
		if got := operator(tc.operators, tc.name); got != tc.want {
			t.Errorf("operators %q, name %q: %v, want %v", tc.operators, tc.name, got, tc.want)
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
