package app

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"troupe/auth"
	"troupe/config"
	"troupe/identity"
)

// oauthValidator is the [auth.oauth] validator, or nil when OAuth is off.
// It fetches nothing now (an issuer down at start does not stop troupe)
// and runs no goroutine: its keys are fetched on requests' behalf, so
// nothing needs stopping with the app.
func oauthValidator(cfg *config.Config, log *slog.Logger) (*auth.OAuthValidator, error) {
	o := cfg.Auth.OAuth
	if o.Issuer == "" {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var operators []string
	for _, op := range cfg.Auth.Operators {
		if s, ok := strings.CutPrefix(op, "scope:"); ok {
			operators = append(operators, s)
		}
	}
	return auth.NewOAuth(auth.OAuthOptions{
		Issuer:         o.Issuer,
		Audience:       oauthAudience(cfg),
		RequiredScopes: o.RequiredScopes,
		SubjectClaim:   o.SubjectClaim,
		Leeway:         o.Leeway,
		Scopes:         o.Scopes,
		OperatorScopes: operators,
		MetadataURL:    auth.MetadataURL(cfg.HTTP.PublicURL),
		Logger:         log.With("component", "oauth"),
	})
}

// oauthAudience is the resource access tokens must be issued for (RFC
// 8707): auth.oauth.audience, else http.public_url, else the MCP URL as
// served on http.listen.
func oauthAudience(cfg *config.Config) string {
	switch {
	case cfg.Auth.OAuth.Audience != "":
		return cfg.Auth.OAuth.Audience
	case cfg.HTTP.PublicURL != "":
		return cfg.HTTP.PublicURL
	default:
		return "http://" + cfg.HTTP.Listen + cfg.HTTP.Path
	}
}

// refuseAll is the validator of an [auth.oauth] that cannot be used
// (config validation refuses such a config first; this keeps the front
// closed should one get through): every token is refused, with why.
type refuseAll struct{ why string }

// Validate implements auth.Validator.
func (r refuseAll) Validate(context.Context, string) (*identity.Identity, *auth.Refusal) {
	return nil, &auth.Refusal{Status: http.StatusUnauthorized, Code: "invalid_token",
		Message: "OAuth is misconfigured on this server: " + r.why}
}
