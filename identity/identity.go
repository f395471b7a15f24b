// Package identity names who is calling: a named static token, an OAuth
// subject of an issuer, the local user of a stdio connection, or nobody in
// particular (an HTTP front without authentication).
//
// An Identity is what sessions, approval states, spooled output and limits
// are bound to. It is never the credential itself: a rotated static token
// keeps its name, and a refreshed access token keeps its (issuer, subject),
// so the same caller keeps its sessions while another caller, whatever
// valid credential it holds, never reaches them.
package identity

import (
	"context"
	"crypto/sha256"
	"path"
	"slices"
	"strings"
)

// Kind says which namespace an identity's name lives in: a token named
// "alice" and an OAuth subject "alice" are different callers.
type Kind uint8

const (
	// Anonymous is an HTTP caller of a front that asks for no credential
	// (loopback without a token).
	Anonymous Kind = iota
	// Local is the user of a stdio connection.
	Local
	// Token is the holder of a named static token ([[auth.tokens]]).
	Token
	// OAuth is the subject of a validated OAuth access token.
	OAuth
)

// String names the kind as logs and the audit log show it.
func (k Kind) String() string {
	switch k {
	case Local:
		return "local"
	case Token:
		return "token"
	case OAuth:
		return "oauth"
	default:
		return "anonymous"
	}
}

// Identity is one caller. Its zero value is Anonymous.
type Identity struct {
	Kind Kind
	// Name is the token's name (Token) or the subject (OAuth).
	Name string
	// Issuer is the OAuth issuer the subject belongs to.
	Issuer string
	// Scopes are the OAuth scopes the access token granted.
	Scopes []string
	// Tools is what the identity may use; nil: everything the server
	// exposes.
	Tools *Grant
	// Operator: the identity may use /status, /metrics and operator
	// actions, and see every tenant there.
	Operator bool
}

// Key is the identity's unique name across kinds: what sessions, states
// and limits are keyed by. It holds no credential.
func (id *Identity) Key() string {
	switch id.Kind {
	case Token:
		return "token:" + id.Name
	case OAuth:
		return "oauth:" + id.Issuer + "\x00" + id.Name
	case Local:
		return "local"
	default:
		return "anonymous"
	}
}

// Owner is the identity's key hashed to a fixed size: the owner a session,
// an approval state or a spooled output is bound to.
func (id *Identity) Owner() [32]byte {
	if id.Kind == Anonymous {
		return [32]byte{} // what an unauthenticated front always used
	}
	return sha256.Sum256([]byte(id.Key()))
}

// String is the identity as the audit log, traces and the status page name
// it: "token:<name>", "oauth:<subject>", "local" or "anonymous". It never
// holds a credential.
func (id *Identity) String() string {
	switch id.Kind {
	case Token, OAuth:
		return id.Kind.String() + ":" + id.Name
	default:
		return id.Kind.String()
	}
}

// Label is the identity for a metric label, whose values must stay few:
// the token's name (the config bounds them), or the kind.
func (id *Identity) Label() string {
	if id.Kind == Token {
		return "token:" + id.Name
	}
	return id.Kind.String()
}

// LabelOf is Label of the identity whose String is s, for those that
// keep only the String (the audit record, the call's view): "token:<name>"
// stays, an OAuth subject becomes "oauth" (subjects are unbounded), "local"
// and "anonymous" stay; anything else, "" included, is "unknown". It
// returns s or a constant, so it costs no allocation.
func LabelOf(s string) string {
	switch {
	case strings.HasPrefix(s, "token:"):
		return s
	case strings.HasPrefix(s, "oauth:"):
		return "oauth"
	case s == "local", s == "anonymous":
		return s
	default:
		return "unknown"
	}
}

// Grant is what an identity may use, by glob over exposed tool names
// (path.Match syntax); deny wins over allow.
type Grant struct {
	Allow []string
	Deny  []string
}

// Allows reports whether the grant covers the tool exposed as name. A nil
// grant allows everything.
func (g *Grant) Allows(name string) bool {
	if g == nil {
		return true
	}
	if slices.ContainsFunc(g.Deny, func(p string) bool { return match(p, name) }) {
		return false
	}
	return slices.ContainsFunc(g.Allow, func(p string) bool { return match(p, name) })
}

// Same reports whether g and o allow the same names by the same globs (a
// nil grant is the same only as another nil one).
func (g *Grant) Same(o *Grant) bool {
	if g == nil || o == nil {
		return g == o
	}
	return g == o || slices.Equal(g.Allow, o.Allow) && slices.Equal(g.Deny, o.Deny)
}

func match(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// contextKey is the request context's key for who made the request.
type contextKey struct{}

// NewContext returns ctx carrying who: how the HTTP front tells a handler
// it mounts (the status page) who is asking, and how the gateway's tools
// know their caller. A nil who (stdio's local user) leaves ctx as it is.
func NewContext(ctx context.Context, who *Identity) context.Context {
	if who == nil {
		return ctx
	}
	return context.WithValue(ctx, contextKey{}, who)
}

// FromContext returns the identity NewContext put in ctx, or nil.
func FromContext(ctx context.Context) *Identity {
	who, _ := ctx.Value(contextKey{}).(*Identity)
	return who
}
