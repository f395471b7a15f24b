// Package auth answers who sent an HTTP request: it reads the bearer
// credential, finds the named static token it is (in constant time) or
// has an OAuth access token validated, and returns the caller's
// identity, or a refusal that says what the client should do (RFC 6750's
// error codes, which the HTTP front turns into WWW-Authenticate).
//
// The credential itself goes no further than this package: sessions,
// approval states, limits and logs see only the identity.
package auth

import (
	"context"
	"net/http"
	"strings"

	"troupe/identity"
)

// Authenticator answers who sent an HTTP request.
type Authenticator interface {
	// Authenticate returns the caller, or why its credential is refused.
	Authenticate(r *http.Request) (*identity.Identity, *Refusal)
}

// Refusal is why a request's credential was not accepted.
type Refusal struct {
	// Status is 401 (no or bad credential) or 403 (a valid one that lacks
	// a scope).
	Status int
	// Code is RFC 6750's error: "" (no credential sent), "invalid_request",
	// "invalid_token" or "insufficient_scope".
	Code string
	// Scope is the scope the request needs, with insufficient_scope.
	Scope string
	// Message says what was wrong, for the client and the log; it never
	// holds the credential.
	Message string
}

// Validator checks an OAuth access token (a JWT) and returns its
// subject's identity.
type Validator interface {
	Validate(ctx context.Context, token string) (*identity.Identity, *Refusal)
}

// Chain is the HTTP front's Authenticator: the named static tokens and,
// when configured, an OAuth validator, both on at once if the config says
// so. Its zero value asks for nothing: every caller is Anonymous.
type Chain struct {
	Tokens *Tokens
	OAuth  Validator
	// Metadata describes the protected resource OAuth guards (RFC 9728),
	// apart from OAuth so that a wrapped validator keeps it; nil: none.
	Metadata ResourceDescriber
}

// Required reports whether callers must send a credential.
func (c *Chain) Required() bool { return c != nil && (c.Tokens.Len() > 0 || c.OAuth != nil) }

// Authenticate implements Authenticator.
func (c *Chain) Authenticate(r *http.Request) (*identity.Identity, *Refusal) {
	if !c.Required() {
		return &identity.Identity{}, nil
	}
	token, refusal := Bearer(r)
	if refusal != nil {
		return nil, refusal
	}
	if id, ok := c.Tokens.Lookup(token); ok {
		return id, nil
	}
	if c.OAuth != nil {
		return c.OAuth.Validate(r.Context(), token)
	}
	return nil, &Refusal{Status: http.StatusUnauthorized, Code: "invalid_token", Message: "invalid bearer token"}
}

// Bearer reads the request's bearer token from its one Authorization
// header. A token in the query string (access_token) is refused: URLs end
// up in logs and histories (OAuth 2.1 forbids it).
func Bearer(r *http.Request) (string, *Refusal) {
	if r.URL.Query().Has("access_token") {
		return "", &Refusal{Status: http.StatusUnauthorized, Code: "invalid_request",
			Message: "a token in the query string is not accepted: send Authorization: Bearer <token>"}
	}
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return "", &Refusal{Status: http.StatusUnauthorized,
			Message: "authentication required: send Authorization: Bearer <token>"}
	}
	if len(values) > 1 {
		return "", &Refusal{Status: http.StatusUnauthorized, Code: "invalid_request",
			Message: "more than one Authorization header"}
	}
	scheme, token, found := strings.Cut(values[0], " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "Bearer") || token == "" {
		// No bearer credential at all: RFC 6750 has no error code for that.
		return "", &Refusal{Status: http.StatusUnauthorized,
			Message: "authentication required: send Authorization: Bearer <token>"}
	}
	return token, nil
}
