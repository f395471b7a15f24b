package app

import (
	"log/slog"
	"slices"

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
		out = append(out, auth.StaticToken{Name: "default", Token: t, Operator: operator(ops, "default")})
	}
	for _, t := range cfg.Auth.Tokens {
		s := auth.StaticToken{Name: t.Name, Token: t.Token, Operator: operator(ops, t.Name)}
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

// operator reports whether the holder of the token named name may use
// /status, /metrics and operator actions: every token when [auth]
// operators is empty, as before identities existed (a valid token was
// the operators' secret), else those it names. Its "scope:<scope>"
// entries are OAuth's: the validator marks those subjects (OAuthOptions.
// OperatorScopes), and an OAuth subject is an operator only when named
// so, since there was no "before" for it to keep.
func operator(operators []string, name string) bool {
	return len(operators) == 0 || slices.Contains(operators, name)
}

// authChain is who the HTTP front accepts, as the config says: the named
// static tokens and, with [auth.oauth], OAuth access tokens (the
// validator logs to log when the issuer cannot be reached).
func authChain(cfg *config.Config, log *slog.Logger) *auth.Chain {
	c := &auth.Chain{Tokens: auth.NewTokens(staticTokens(cfg))}
	if v, err := oauthValidator(cfg, log); err != nil {
		c.OAuth = refuseAll{why: err.Error()}
	} else if v != nil {
		c.OAuth, c.Metadata = v, v
	}
	return c
}

// authRequired reports whether the HTTP front asks callers for a credential.
func authRequired(cfg *config.Config) bool {
	return cfg.Auth.OAuth.Issuer != "" || auth.NewTokens(staticTokens(cfg)).Len() > 0
}
