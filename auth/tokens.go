package auth

import (
	"crypto/sha256"
	"crypto/subtle"

	"troupe/identity"
)

// StaticToken is one named static token as the config gives it.
type StaticToken struct {
	Name  string
	Token string
	// Tools is what the token's holder may use; nil: everything.
	Tools *identity.Grant
	// Operator: the holder may use /status, /metrics and operator actions.
	Operator bool
}

// Tokens is the table of named static tokens. Lookup compares a presented
// token with every entry in constant time, so neither the match nor its
// position leaks through timing; only sha256 sums are kept.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum [32]byte
	id  identity.Identity
}

// NewTokens makes the table; entries with an empty token are left out.
func NewTokens(tokens []StaticToken) *Tokens {
	t := &Tokens{}
	for _, s := range tokens {
		if s.Token == "" {
			continue
		}
		t.entries = append(t.entries, tokenEntry{sum: sha256.Sum256([]byte(s.Token)),
			id: identity.Identity{Kind: identity.Token, Name: s.Name, Tools: s.Tools, Operator: s.Operator}})
	}
	return t
}

// Len is the number of tokens; a nil table has none.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Lookup returns the identity of the token's holder.
func (t *Tokens) Lookup(token string) (*identity.Identity, bool) {
	return t.LookupSum(sha256.Sum256([]byte(token)))
}

// LookupSum is Lookup for a token known by its SHA-256 (the status page's
// logins keep only that): whether it is still in the table, and whose.
func (t *Tokens) LookupSum(sum [32]byte) (*identity.Identity, bool) {
	if t == nil {
		return nil, false
	}
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	id := t.entries[found].id
	return &id, true
}

// Names lists the tokens' names (for a reload to end the sessions of a
// token it removed).
func (t *Tokens) Names() []string {
	var out []string
	if t == nil {
		return out
	}
	for _, e := range t.entries {
		out = append(out, e.id.Name)
	}
	return out
}
