package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOAuthResourceServer runs troupe with [auth.oauth] trusting a real
// authorization server (oidc-provider on loopback) and sends it the tokens
// the MCP authorization spec says a resource server must accept or refuse:
// a valid token works; a token for another resource, an expired one, one
// from another issuer, an opaque one, alg "none", HS256 keyed with the
// issuer's public key and a token in the query string get 401 with a
// challenge naming the protected resource metadata, which names the
// issuer; a token without the required scope gets 403 insufficient_scope;
// after the issuer rotates its key, a token under the new kid is accepted
// once troupe refreshes its JWKS, and one under the withdrawn key no longer
// is. The TypeScript SDK finds the issuer from the 401 and authorizes by
// itself. No token reaches the log or the audit.
func TestOAuthResourceServer(t *testing.T) {
	issuer := startOIDC(t)
	stranger := startOIDC(t) // another issuer troupe does not trust
	fx := newFixture(t)
	audit := t.TempDir() + "/audit.jsonl"
	srv := startHTTPServer(t, fx.dir, "", "--config", oauthConfig(t, issuer.Issuer, audit, ""))
	resource := srv.url

	var tokens []string // every token sent: none may reach the log or audit
	mint := func(o *oidcServer, client, resource, scope string) string {
		tok := o.token(t, client, resource, scope)
		tokens = append(tokens, tok)
		return tok
	}

	valid := mint(issuer, "app", resource, "mcp:read mcp:write")
	// Minted now, used after it expired (3 s of life, 1 s of leeway).
	short := mint(issuer, "short", resource, "mcp:read")
	shortMinted := time.Now()

	t.Run("valid token", func(t *testing.T) {
		a := modernToolsList(t, srv.url, "Bearer "+valid)
		if a.status != http.StatusOK {
			t.Fatalf("tools/list with a valid token: %d %s", a.status, a.brief())
		}
		var m map[string]any
		if err := json.Unmarshal(a.body, &m); err != nil {
			t.Fatalf("tools/list: not JSON: %s", a.body)
		}
		if names := sortedToolNames(t, checkModernResult(t, "tools/list", m)); !slices.Contains(names, "repo.readFile") {
			t.Fatalf("tools/list with a valid token: %v", names)
		}
		if a := modernToolsList(t, srv.url, "Bearer "+short); a.status != http.StatusOK {
			t.Fatalf("a short-lived token, fresh: %d %s", a.status, a.brief())
		}
	})

	var metadataURL string
	refused := func(t *testing.T, a oauthAnswer, status int, code string) map[string]string {
		t.Helper()
		if a.status != status {
			t.Fatalf("status %d, want %d: %s", a.status, status, a.brief())
		}
		h := a.header.Get("WWW-Authenticate")
		params, ok := challengeParams(h)
		if !ok || params["resource_metadata"] == "" {
			t.Fatalf("WWW-Authenticate %q: want a Bearer challenge with resource_metadata", h)
		}
		if params["error"] != code {
			t.Errorf("WWW-Authenticate %q: error %q, want %q", h, params["error"], code)
		}
		metadataURL = params["resource_metadata"]
		return params
	}

	t.Run("no token", func(t *testing.T) {
		refused(t, modernToolsList(t, srv.url, ""), http.StatusUnauthorized, "")
	})

	cases := []struct {
		name  string
		token func(t *testing.T) string
	}{
		{"wrong audience", func(t *testing.T) string {
			return mint(issuer, "app", "http://127.0.0.1:1/another-mcp", "mcp:read mcp:write")
		}},
		{"wrong issuer", func(t *testing.T) string {
			return mint(stranger, "app", resource, "mcp:read mcp:write")
		}},
		{"opaque token", func(t *testing.T) string {
			return mint(issuer, "app", "", "mcp:read mcp:write")
		}},
		{"alg none", func(t *testing.T) string {
			tok := unsignedToken(issuer.Kid, issuer.claims(resource, "mcp:read mcp:write"))
			tokens = append(tokens, tok)
			return tok
		}},
		{"HS256 keyed with the public key", func(t *testing.T) string {
			tok := hmacWithPublicKey(t, issuer.publicKey(t), issuer.Kid, issuer.claims(resource, "mcp:read mcp:write"))
			tokens = append(tokens, tok)
			return tok
		}},
		{"not a token", func(t *testing.T) string { return "not-a-jwt" }},
		{"expired", func(t *testing.T) string {
			time.Sleep(time.Until(shortMinted.Add(5 * time.Second)))
			return short
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refused(t, modernToolsList(t, srv.url, "Bearer "+c.token(t)), http.StatusUnauthorized, "invalid_token")
		})
	}

	t.Run("token in the query string", func(t *testing.T) {
		a := modernToolsList(t, srv.url+"?access_token="+url.QueryEscape(valid), "")
		if a.status != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401: %s", a.status, a.brief())
		}
		if params, ok := challengeParams(a.header.Get("WWW-Authenticate")); !ok || params["resource_metadata"] == "" {
			t.Fatalf("WWW-Authenticate %q: want a Bearer challenge with resource_metadata", a.header.Get("WWW-Authenticate"))
		}
	})

	t.Run("insufficient scope", func(t *testing.T) {
		params := refused(t, modernToolsList(t, srv.url, "Bearer "+mint(issuer, "app", resource, "mcp:write")),
			http.StatusForbidden, "insufficient_scope")
		if !slices.Contains(strings.Fields(params["scope"]), "mcp:read") {
			t.Errorf("the scope challenge names scope %q, want mcp:read in it", params["scope"])
		}
	})

	t.Run("protected resource metadata", func(t *testing.T) {
		if metadataURL == "" {
			t.Skip("no challenge gave a resource_metadata URL")
		}
		resp, err := loopbackClient.Get(metadataURL)
		if err != nil {
			t.Fatalf("GET %s: %v", metadataURL, err)
		}
		defer resp.Body.Close()
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", metadataURL, resp.StatusCode, err)
		}
		if doc.Resource != resource || !slices.Contains(doc.AuthorizationServers, issuer.Issuer) {
			t.Fatalf("RFC 9728 document: %+v, want resource %s and authorization server %s", doc, resource, issuer.Issuer)
		}
	})

	t.Run("key rotation", func(t *testing.T) {
		kid := issuer.rotate(t)
		fresh := mint(issuer, "app", resource, "mcp:read mcp:write")
		// troupe refreshes the JWKS on an unknown kid, at a bounded rate:
		// the first tries may come before it may refresh again.
		deadline := time.Now().Add(70 * time.Second)
		for {
			a := modernToolsList(t, srv.url, "Bearer "+fresh)
			if a.status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a token under the issuer's new key %s is still refused after 70 s: %d %s", kid, a.status, a.brief())
			}
			time.Sleep(time.Second)
		}
		// The refresh dropped the key the issuer withdrew: a token it
		// signed no longer passes.
		refused(t, modernToolsList(t, srv.url, "Bearer "+valid), http.StatusUnauthorized, "invalid_token")
		valid = fresh
	})

	t.Run("a tool call", func(t *testing.T) {
		// Something in the audit log to search for tokens.
		resp := modernPost(t, srv.url, "Bearer "+valid, "tools/call", "repo.readFile",
			`"name":"repo.readFile","arguments":{"path":"README.md"}`)
		if resp.status != http.StatusOK || !strings.Contains(string(resp.body), "A workspace for troupe") {
			t.Fatalf("repo.readFile with a valid token: %d %s", resp.status, resp.brief())
		}
	})

	t.Run("TypeScript SDK", func(t *testing.T) {
		// The SDK starts without a token, follows the 401's
		// resource_metadata to the issuer, gets a token for the resource
		// the metadata names and calls a tool with it.
		app := issuer.Clients["app"]
		res := runScenario(t, scenario{
			Transport: transport{Kind: "http", URL: srv.url, OAuth: &oauthClient{
				ClientID: app.ID, ClientSecret: app.Secret, Issuer: issuer.Issuer, Scope: "mcp:read mcp:write"}},
			Steps: []step{listTools(), callTool("repo.readFile", map[string]any{"path": "README.md"})},
		})
		if res.OAuth == nil || res.OAuth.Tokens == 0 {
			t.Errorf("the SDK got no token through its OAuth support: %+v", res.OAuth)
		}
		for i, s := range res.Steps {
			if !s.OK {
				t.Errorf("step %d: %s", i, s)
			}
		}
		if s := res.Steps[1]; s.OK && !strings.Contains(string(s.Result), "A workspace for troupe") {
			t.Errorf("repo.readFile through the SDK: %s", s)
		}
	})

	t.Run("no token in the log or audit", func(t *testing.T) {
		auditText, err := os.ReadFile(audit)
		if err != nil {
			t.Fatalf("the audit log: %v", err)
		}
		// The calls' records name the caller by issuer's subject (the
		// client, in the client credentials grant), not by its token.
		if !strings.Contains(string(auditText), `"identity":"oauth:troupe-e2e-app"`) {
			t.Errorf("no audit record names the identity oauth:troupe-e2e-app:\n%s", auditText)
		}
		for _, tok := range tokens {
			// The signature part alone is enough to betray a token.
			parts := strings.Split(tok, ".")
			secret := parts[len(parts)-1]
			if secret == "" {
				secret = parts[0] + "." + parts[1]
			}
			if strings.Contains(srv.log.String(), secret) {
				t.Errorf("troupe's log holds a token's bytes (%.12s…)", secret)
			}
			if strings.Contains(string(auditText), secret) {
				t.Errorf("the audit log holds a token's bytes (%.12s…)", secret)
			}
		}
	})
}
