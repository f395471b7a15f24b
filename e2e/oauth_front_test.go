package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"troupe/auth"
	"troupe/auth/oauthtest"
)

// oauthPost POSTs a JSON-RPC body to srv's MCP endpoint with token as the
// bearer credential ("" sends none) and returns the response, body read.
func oauthPost(t *testing.T, url, token, session, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const oauthInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
	`"capabilities":{},"clientInfo":{"name":"oauth-e2e","version":"1"}}}`

// TestOAuthFront runs the binary as an OAuth resource server of a loopback
// issuer: its metadata names the issuer and the served MCP URL as the
// audience (no audience or public_url configured), challenges name the
// metadata, a token for this server works, one in the query string, one
// lacking the required scope or one for another server does not, and no
// token reaches the log.
func TestOAuthFront(t *testing.T) {
	is := oauthtest.New(t)
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, "",
		"-c", `auth.oauth.issuer="`+is.URL+`"`,
		"-c", `auth.oauth.required_scopes=["mcp"]`,
		"-c", `auth.oauth.scopes.mcp=["*"]`)
	metaURL := srv.base + auth.MetadataPath + "/mcp"

	resp, err := loopbackClient.Get(metaURL)
	if err != nil {
		t.Fatal(err)
	}
	var meta auth.ProtectedResource
	if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", metaURL, resp.StatusCode, err)
	}
	resp.Body.Close()
	if meta.Resource != srv.url || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != is.URL ||
		strings.Join(meta.ScopesSupported, " ") != "mcp" {
		t.Fatalf("metadata = %+v; want resource %s, issuer %s, scopes [mcp]", meta, srv.url, is.URL)
	}

	valid := is.Token("k1", is.Claims(srv.url, "alice", "mcp"))
	var sent []string
	for _, tc := range []struct {
		name, token, query string
		status             int
		challenge          string
	}{
		{"no token", "", "", 401, `Bearer realm="troupe", resource_metadata="` + metaURL + `"`},
		{"token for another server", is.Token("k1", is.Claims("https://other.example/mcp", "alice", "mcp")), "", 401,
			`Bearer realm="troupe", resource_metadata="` + metaURL + `", error="invalid_token"`},
		{"token without the scope", is.Token("k1", is.Claims(srv.url, "alice", "other")), "", 403,
			`Bearer realm="troupe", resource_metadata="` + metaURL + `", error="insufficient_scope", scope="mcp"`},
		{"token in the query string", "", "?access_token=" + valid, 401,
			`Bearer realm="troupe", resource_metadata="` + metaURL + `", error="invalid_request"`},
	} {
		sent = append(sent, tc.token)
		resp, body := oauthPost(t, srv.url+tc.query, tc.token, "", oauthInit)
		if resp.StatusCode != tc.status || resp.Header.Get("WWW-Authenticate") != tc.challenge {
			t.Errorf("%s: %d %q %s; want %d %q", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body,
				tc.status, tc.challenge)
		}
	}

	resp, body := oauthPost(t, srv.url, valid, "", oauthInit)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize with a valid token: %d %s", resp.StatusCode, body)
	}
	oauthPost(t, srv.url, valid, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, body = oauthPost(t, srv.url, valid, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"tools"`) {
		t.Fatalf("tools/list with a valid token: %d %s", resp.StatusCode, body)
	}

	for _, tok := range append(sent, valid) {
		if tok == "" {
			continue
		}
		_, payload, _ := strings.Cut(tok, ".")
		payload, _, _ = strings.Cut(payload, ".")
		if strings.Contains(srv.log.String(), payload) {
			t.Fatal("a token's payload is in troupe's log")
		}
	}
}

// TestOAuthIssuerDownAtStart: an issuer that cannot be reached does not
// stop troupe from starting; a token is refused with a message naming the
// issuer's problem, which is logged.
func TestOAuthIssuerDownAtStart(t *testing.T) {
	is := oauthtest.New(t)
	tok := is.Token("k1", is.Claims("http://unused", "alice", ""))
	down := "http://127.0.0.1:1" // nothing listens on port 1
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, "", "-c", `auth.oauth.issuer="`+down+`"`, "-c", `auth.oauth.audience="http://unused"`)
	resp, body := oauthPost(t, srv.url, tok, "", oauthInit)
	if resp.StatusCode != 401 || !strings.Contains(body, "the OAuth issuer "+down+" could not be used") ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("a token while the issuer is down: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	if !srv.waitLog("OAuth issuer's keys could not be fetched", 5e9) {
		t.Fatal("the issuer's failure was not logged")
	}
}
