package app

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"troupe/auth"
	"troupe/config"
	"troupe/identity"
)

// staticTokens lists the config's named tokens for the HTTP front:
// http.auth.bearer_token (and --bearer-token-env) is the one named
// "default", beside every [[auth.tokens]] entry. Each says whether its
// holder is an operator (operator).
func staticTokens(cfg *config.Config) []auth.StaticToken {
	var out []auth.StaticToken
	ops := cfg.Auth.Operators
	if t := cfg.HTTP.Auth.BearerToken; t != "" {
		out = append(out, auth.StaticToken{Name: "default", Token: t, Operator: operator(ops, "default", nil)})
	}
	for _, t := range cfg.Auth.Tokens {
		s := auth.StaticToken{Name: t.Name, Token: t.Token, Operator: operator(ops, t.Name, nil)}
		if len(t.AllowTools) > 0 || len(t.DenyTools) > 0 {
			allow := t.AllowTools
			if len(allow) == 0 {
				allow = []string{"*"}
			}
			s.Tools = &identity.Grant{Allow: allow, Deny: t.DenyTools}
		}
		out = append(out, s)
	}
	return out
}

// operatorScope prefixes an [auth] operators entry that names an OAuth
// scope rather than a token.
const operatorScope = "scope:"

// operator reports whether the holder of the token named name (or of an
// access token with scopes; name "" then) may use /status, /metrics and
// operator actions: every caller when [auth] operators is empty, as
// before identities existed (a valid token was the operators' secret),
// else those it names.
func operator(operators []string, name string, scopes []string) bool {
	if len(operators) == 0 {
		return true
	}
	return slices.ContainsFunc(operators, func(o string) bool {
		if s, ok := strings.CutPrefix(o, operatorScope); ok {
			return slices.Contains(scopes, s)
		}
		return name != "" && o == name
	})
}

// operatorScopes marks the OAuth identities whose scopes [auth] operators
// names as operators; the validator it wraps knows nothing of operators.
type operatorScopes struct {
	next      auth.Validator
	operators []string
}

// Validate implements auth.Validator.
func (o operatorScopes) Validate(ctx context.Context, token string) (*identity.Identity, *auth.Refusal) {
	who, refusal := o.next.Validate(ctx, token)
	if who == nil {
		return nil, refusal
	}
	marked := *who // the validator's value stays its own
	marked.Operator = operator(o.operators, "", who.Scopes)
	return &marked, refusal
}

// authChain is who the HTTP front accepts, as the config says: the named
// static tokens and, with [auth.oauth], OAuth access tokens (the
// validator logs to log when the issuer cannot be reached), whose holders
// of a scope [auth] operators names are operators.
func authChain(cfg *config.Config, log *slog.Logger) *auth.Chain {
	c := &auth.Chain{Tokens: auth.NewTokens(staticTokens(cfg))}
	if v, err := oauthValidator(cfg, log); err != nil {
		c.OAuth = refuseAll{why: err.Error()}
	} else if v != nil {
		c.OAuth = operatorScopes{next: v, operators: cfg.Auth.Operators}
		c.Metadata = v
	}
	return c
}

// authRequired reports whether the HTTP front asks callers for a credential.
func authRequired(cfg *config.Config) bool {
	return len(staticTokens(cfg)) > 0 || cfg.Auth.OAuth.Issuer != ""
}
