package app

import (
	"reflect"
	"testing"

	"troupe/auth"
	"troupe/config"
)

func TestOAuthAudienceDefaults(t *testing.T) {
	cfg := &config.Config{}
	cfg.HTTP.Listen, cfg.HTTP.Path = "127.0.0.1:8080", "/mcp"
	cfg.Auth.OAuth.Issuer = "https://kc.example/realms/acme"
	if got := oauthAudience(cfg); got != "http://127.0.0.1:8080/mcp" {
		t.Fatalf("audience without public_url = %q; want the served MCP URL", got)
	}
	cfg.HTTP.PublicURL = "https://mcp.example/mcp"
	if got := oauthAudience(cfg); got != "https://mcp.example/mcp" {
		t.Fatalf("audience with public_url = %q", got)
	}
	cfg.Auth.OAuth.Audience = "https://api.example"
	if got := oauthAudience(cfg); got != "https://api.example" {
		t.Fatalf("audience with auth.oauth.audience = %q", got)
	}

	c := authChain(cfg, nil)
	d, ok := c.Resource()
	if !ok || c.OAuth == nil || !c.Required() {
		t.Fatal("[auth.oauth] with an issuer gave a chain without OAuth")
	}
	if d.MetadataURL() != "https://mcp.example/.well-known/oauth-protected-resource/mcp" ||
		d.ProtectedResource().Resource != "https://api.example" {
		t.Fatalf("metadata URL %q, resource %q", d.MetadataURL(), d.ProtectedResource().Resource)
	}
	if !authRequired(cfg) {
		t.Fatal("authRequired is false with OAuth on")
	}
}

func TestOAuthMisconfiguredRefusesEveryToken(t *testing.T) {
	cfg := &config.Config{}
	cfg.HTTP.Listen, cfg.HTTP.Path = "0.0.0.0:8080", "/mcp"
	cfg.Auth.OAuth.Issuer = "http://kc.example" // not loopback: refused
	if _, err := checkHTTPAddress(cfg); err == nil {
		t.Fatal("an http:// issuer off loopback passed the start-up checks")
	}
	c := authChain(cfg, nil)
	if c.OAuth == nil {
		t.Fatal("a misconfigured [auth.oauth] left the front without OAuth")
	}
	if _, r := c.OAuth.Validate(t.Context(), "x.y.z"); r == nil || r.Status != 401 {
		t.Fatalf("a misconfigured validator answered %+v", r)
	}
}

// A reload that changes [auth.oauth] or auth.operators puts a new
// validator in force (the "auth" rule applies it).
func TestReloadRuleAuthCoversOAuth(t *testing.T) {
	var rule reloadRule
	for _, r := range reloadRules {
		if r.key == "auth" {
			rule = r
		}
	}
	a, b := &config.Config{}, &config.Config{}
	a.Auth.OAuth.Issuer, b.Auth.OAuth.Issuer = "https://a.example", "https://b.example"
	if reflect.DeepEqual(rule.part(a), rule.part(b)) {
		t.Fatal("the auth rule does not see a change of auth.oauth.issuer")
	}
	b.Auth.OAuth.Issuer = a.Auth.OAuth.Issuer
	b.Auth.OAuth.Scopes = map[string][]string{"mcp": {"*"}}
	if reflect.DeepEqual(rule.part(a), rule.part(b)) {
		t.Fatal("the auth rule does not see a change of [auth.oauth.scopes]")
	}
	var _ auth.Validator = refuseAll{}
}
