package app

import (
	"troupe/auth"
	"troupe/config"
	"troupe/identity"
)

// staticTokens lists the config's named tokens for the HTTP front:
// http.auth.bearer_token (and --bearer-token-env) is the one named
// "default", beside every [[auth.tokens]] entry.
func staticTokens(cfg *config.Config) []auth.StaticToken {
	var out []auth.StaticToken
	if t := cfg.HTTP.Auth.BearerToken; t != "" {
		out = append(out, auth.StaticToken{Name: "default", Token: t})
	}
	for _, t := range cfg.Auth.Tokens {
		s := auth.StaticToken{Name: t.Name, Token: t.Token}
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

// authChain is who the HTTP front accepts, as the config says.
func authChain(cfg *config.Config) *auth.Chain {
	return &auth.Chain{Tokens: auth.NewTokens(staticTokens(cfg))}
}

// authRequired reports whether the HTTP front asks callers for a credential.
func authRequired(cfg *config.Config) bool {
	return len(staticTokens(cfg)) > 0 || cfg.Auth.OAuth.Issuer != ""
}
