package app

import (
	"log/slog"

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

// authRequired reports whether the HTTP front asks callers for a
// credential: a static token, or an OAuth issuer's access token.
func authRequired(cfg *config.Config) bool {
	return cfg.Auth.OAuth.Issuer != "" || auth.NewTokens(staticTokens(cfg)).Len() > 0
}
