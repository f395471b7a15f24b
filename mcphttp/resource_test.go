package mcphttp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"troupe/auth"
	"troupe/auth/oauthtest"
)

const oauthAudience = "http://mcp.test/mcp"

// oauthRig is a front that accepts the test issuer's tokens for
// oauthAudience and asks for the scope mcp:use.
func oauthRig(t *testing.T, metadataURL string) (*rig, *oauthtest.Issuer) {
	t.Helper()
	is := oauthtest.New(t)
	v, err := auth.NewOAuth(auth.OAuthOptions{Issuer: is.URL, Audience: oauthAudience,
		RequiredScopes: []string{"mcp:use"}, Scopes: map[string][]string{"mcp:tools": {"echo"}},
		MetadataURL: metadataURL})
	if err != nil {
		t.Fatal(err)
	}
	return newRig(t, rigConfig{opts: Options{Auth: &auth.Chain{Tokens: namedTokens("ci", "s3cret").Tokens, OAuth: v, Metadata: v}}}), is
}

func TestOAuthChallenges(t *testing.T) {
	r, is := oauthRig(t, "")
	meta := r.base + auth.MetadataPath + "/mcp"
	valid := is.Token("k1", is.Claims(oauthAudience, "alice", "mcp:use"))
	for _, tc := range []struct {
		name, auth, query string
		status            int
		challenge         string
	}{
		{"no token", "", "", 401, `Bearer realm="troupe", resource_metadata="` + meta + `"`},
		{"opaque token", "Bearer 2YotnFZFEjr1zCsicMWpAA", "", 401,
			`Bearer realm="troupe", resource_metadata="` + meta + `", error="invalid_token"`},
		{"another audience", "Bearer " + is.Token("k1", is.Claims("https://other.example/mcp", "alice", "mcp:use")), "", 401,
			`Bearer realm="troupe", resource_metadata="` + meta + `", error="invalid_token"`},
		{"missing scope", "Bearer " + is.Token("k1", is.Claims(oauthAudience, "alice", "mcp:tools")), "", 403,
			`Bearer realm="troupe", resource_metadata="` + meta + `", error="insufficient_scope", scope="mcp:use"`},
		{"valid token in the query string", "", "?access_token=" + valid, 401,
			`Bearer realm="troupe", resource_metadata="` + meta + `", error="invalid_request"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := r.request(context.Background(), "POST", "", initBody("2025-06-18"), "Authorization", tc.auth)
			req.URL.RawQuery = strings.TrimPrefix(tc.query, "?")
			resp, err := r.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tc.status || resp.Header.Get("WWW-Authenticate") != tc.challenge {
				t.Fatalf("%d WWW-Authenticate %q %s; want %d %q", resp.StatusCode,
					resp.Header.Get("WWW-Authenticate"), body, tc.status, tc.challenge)
			}
			checkRefusal(t, resp, body, -32000)
			if strings.Contains(string(body), strings.TrimPrefix(tc.auth, "Bearer ")) && tc.auth != "" {
				t.Fatalf("the refusal holds the token: %s", body)
			}
		})
	}

	// A valid token makes a session; a fresh token of the same subject
	// continues it, another subject's valid token does not reach it, and
	// the static token still works beside OAuth.
	r.token = valid
	id := r.initialize("2025-06-18")
	r.token = is.Token("k1", is.Claims(oauthAudience, "alice", "mcp:use mcp:tools"))
	if resp, body := r.post(id, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 200 {
		t.Fatalf("a fresh token of the same subject: %d %s", resp.StatusCode, body)
	}
	r.token = is.Token("k1", is.Claims(oauthAudience, "bob", "mcp:use"))
	if resp, body := r.post(id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.StatusCode != 404 {
		t.Fatalf("another subject's token on alice's session: %d %s", resp.StatusCode, body)
	}
	r.token = "s3cret"
	r.initialize("2025-06-18")
}

func TestOAuthChallengeNamesThePublicMetadataURL(t *testing.T) {
	public := auth.MetadataURL("https://mcp.example/api/mcp")
	if public != "https://mcp.example/.well-known/oauth-protected-resource/api/mcp" {
		t.Fatalf("MetadataURL = %q", public)
	}
	r, _ := oauthRig(t, public)
	resp, body := r.post("", initBody("2025-06-18"))
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 ||
		got != `Bearer realm="troupe", resource_metadata="`+public+`"` {
		t.Fatalf("%d %q %s", resp.StatusCode, got, body)
	}
	// Behind a proxy that forwards the public path as it is.
	if got := getMetadata(t, r, auth.MetadataPath+"/api/mcp"); got.Resource != oauthAudience {
		t.Fatalf("metadata at the public path: %+v", got)
	}
}

func getMetadata(t *testing.T, r *rig, path string) auth.ProtectedResource {
	t.Helper()
	resp, err := r.client.Get(r.base + path)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	var m auth.ProtectedResource
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestProtectedResourceMetadata(t *testing.T) {
	r, is := oauthRig(t, "")
	for _, path := range []string{auth.MetadataPath, auth.MetadataPath + "/mcp"} {
		m := getMetadata(t, r, path)
		if m.Resource != oauthAudience || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != is.URL ||
			strings.Join(m.ScopesSupported, " ") != "mcp:tools mcp:use" ||
			len(m.BearerMethodsSupported) != 1 || m.BearerMethodsSupported[0] != "header" {
			t.Fatalf("GET %s: %+v", path, m)
		}
	}
	resp, err := r.client.Get(r.base + auth.MetadataPath + "/other")
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != 404 {
		t.Fatalf("metadata of another path: %d", resp.StatusCode)
	}
	resp, err = r.client.Post(r.base+auth.MetadataPath, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST to the metadata: %d", resp.StatusCode)
	}

	// Static tokens only: no metadata, and challenges name none.
	static := newRig(t, rigConfig{opts: Options{BearerToken: "s3cret"}})
	resp, err = static.client.Get(static.base + auth.MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != 404 {
		t.Fatalf("metadata without OAuth: %d", resp.StatusCode)
	}
	resp, _ = static.post("", initBody("2025-06-18"))
	if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer realm="troupe"` {
		t.Fatalf("challenge without OAuth: %q", got)
	}
}
