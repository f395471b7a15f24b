package identity

import "testing"

// TestKeysKeepNamespacesApart checks that a token and an OAuth subject of
// the same name, or the same subject of two issuers, are different
// callers, and that the owner key never is the zero an unauthenticated
// front uses.
func TestKeysKeepNamespacesApart(t *testing.T) {
	ids := []Identity{
		{},
		{Kind: Local},
		{Kind: Token, Name: "alice"},
		{Kind: OAuth, Issuer: "https://a.example", Name: "alice"},
		{Kind: OAuth, Issuer: "https://b.example", Name: "alice"},
		{Kind: OAuth, Issuer: "https://a.example\x00alice", Name: ""},
	}
	seen := map[[32]byte]string{}
	for i := range ids {
		o := ids[i].Owner()
		if prev, dup := seen[o]; dup {
			t.Fatalf("%q and %q share an owner key", prev, ids[i].Key())
		}
		seen[o] = ids[i].Key()
		if ids[i].Kind != Anonymous && o == ([32]byte{}) {
			t.Fatalf("%q has the anonymous owner key", ids[i].Key())
		}
	}
	if got := (&Identity{Kind: OAuth, Issuer: "https://a.example", Name: "alice"}).String(); got != "oauth:alice" {
		t.Fatalf("String() = %q", got)
	}
	if got := (&Identity{Kind: OAuth, Name: "alice"}).Label(); got != "oauth" {
		t.Fatalf("an OAuth subject's metric label is %q, want the bounded kind", got)
	}
}

// TestGrantDenyWins checks the grant's globs: allow lists what may be
// used, deny wins, and a nil grant allows everything.
func TestGrantDenyWins(t *testing.T) {
	var none *Grant
	if !none.Allows("anything") {
		t.Fatal("a nil grant refused a tool")
	}
	g := &Grant{Allow: []string{"repo.*", "docs.fetch"}, Deny: []string{"repo.write*"}}
	for name, want := range map[string]bool{
		"repo.read": true, "docs.fetch": true, "repo.write_file": false, "run": false, "[": false,
	} {
		if g.Allows(name) != want {
			t.Errorf("Allows(%q) = %v, want %v", name, !want, want)
		}
	}
	if (&Grant{Allow: []string{"["}}).Allows("[") {
		t.Error("a malformed glob matched")
	}
}

// LabelOf of an identity's String is its Label, for every kind: the
// subject of an OAuth identity never becomes a label value.
func TestLabelOfStringIsLabel(t *testing.T) {
	for _, id := range []*Identity{
		{Kind: Token, Name: "alice"},
		{Kind: OAuth, Issuer: "https://issuer", Name: "subject-1234"},
		{Kind: Local},
		{},
	} {
		if got, want := LabelOf(id.String()), id.Label(); got != want {
			t.Errorf("LabelOf(%q) = %q, want %q", id.String(), got, want)
		}
	}
	if got := LabelOf(""); got != "unknown" {
		t.Errorf(`LabelOf("") = %q`, got)
	}
}
