package e2e

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oidcServer is a real OAuth 2.1 authorization server, oidc-provider run by
// e2e/oidc/provider.mjs on a free loopback port: client credentials, JWT
// access tokens (RS256, typ at+jwt) whose aud is the resource asked for.
type oidcServer struct {
	Issuer  string                `json:"issuer"`
	Kid     string                `json:"kid"`
	Clients map[string]oidcClient `json:"clients"` // "app" (tokens live 5 min), "short" (3 s)

	stderr *lockedWriter
}

// oidcClient is one client credentials client of the provider.
type oidcClient struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// oauthClient is what the TypeScript SDK needs to authorize through its
// ClientCredentialsProvider: a client of the authorization server, the
// issuer it may send the secret to, and the scope to ask for.
type oauthClient struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	Issuer       string `json:"issuer"`
	Scope        string `json:"scope,omitempty"`
}

// requireOIDC returns the path of provider.mjs once node and oidc-provider
// are there: a skip outside CI without them, a failure in CI (as
// requireRunner).
func requireOIDC(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(moduleRoot, "e2e", "oidc")
	var missing string
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); err != nil {
		missing = "e2e/oidc/node_modules has no oidc-provider"
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; scripts/test should have installed it", missing)
		}
		t.Skipf("%s: run scripts/test (installs oidc-provider)", missing)
	}
	return filepath.Join(dir, "provider.mjs")
}

// startOIDC starts an authorization server for the test and returns once it
// printed its issuer. It ends with the test: its stdin closes, and it exits
// on that (or is killed if it does not).
func startOIDC(t *testing.T) *oidcServer {
	t.Helper()
	script := requireOIDC(t)
	cmd := exec.Command("node", script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedWriter{b: &strings.Builder{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting oidc-provider: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("oidc-provider's stderr:\n%s", stderr)
		}
	})

	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("oidc-provider printed no issuer within 30 s; stderr:\n%s", stderr)
	}
	o := &oidcServer{stderr: stderr}
	if err := json.Unmarshal([]byte(line), o); err != nil || o.Issuer == "" {
		t.Fatalf("oidc-provider's first line is not its ready line (%v): %q; stderr:\n%s", err, line, stderr)
	}
	return o
}

// token asks the provider for an access token for resource with scope, as
// client ("app" or "short") with the client credentials grant. Without a
// resource the provider issues an opaque token, not a JWT.
func (o *oidcServer) token(t *testing.T, client, resource, scope string) string {
	t.Helper()
	c, ok := o.Clients[client]
	if !ok {
		t.Fatalf("the provider has no client %q", client)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}
	if resource != "" {
		form.Set("resource", resource)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(c.ID, c.Secret)
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var answer struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || answer.AccessToken == "" {
		t.Fatalf("token request: %d %s", resp.StatusCode, body)
	}
	return answer.AccessToken
}

// rotate makes the provider sign with a fresh key under a new kid and
// publish only that one; it returns the new kid.
func (o *oidcServer) rotate(t *testing.T) string {
	t.Helper()
	resp, err := loopbackClient.Post(o.Issuer+"/control/rotate", "application/json", nil)
	if err != nil {
		t.Fatalf("rotating the provider's key: %v", err)
	}
	defer resp.Body.Close()
	var answer struct {
		Kid string `json:"kid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Kid == "" {
		t.Fatalf("rotating the provider's key: %d %v", resp.StatusCode, err)
	}
	o.Kid = answer.Kid
	return answer.Kid
}

// publicKey is the provider's current RSA signing key, from its JWKS.
func (o *oidcServer) publicKey(t *testing.T) *rsa.PublicKey {
	t.Helper()
	resp, err := loopbackClient.Get(o.Issuer + "/jwks")
	if err != nil {
		t.Fatalf("fetching the JWKS: %v", err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatalf("decoding the JWKS: %v", err)
	}
	for _, k := range set.Keys {
		if k.Kid != o.Kid {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err1 != nil || err2 != nil {
			t.Fatalf("the JWKS key %s is not base64url", k.Kid)
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	t.Fatalf("the JWKS has no key %s", o.Kid)
	return nil
}

// claims are an access token's claims as the provider would write them for
// resource, valid for the next five minutes.
func (o *oidcServer) claims(resource, scope string) map[string]any {
	now := time.Now().Unix()
	return map[string]any{"iss": o.Issuer, "sub": "forged-client", "client_id": "forged-client",
		"aud": resource, "scope": scope, "iat": now, "exp": now + 300, "jti": "forged"}
}

// unsignedToken is a JWT with alg "none" and no signature: what an attacker
// hopes a careless validator accepts.
func unsignedToken(kid string, claims map[string]any) string {
	return jwtSigningInput(map[string]any{"alg": "none", "typ": "at+jwt", "kid": kid}, claims) + "."
}

// hmacWithPublicKey is the algorithm-confusion attack: an HS256 token whose
// HMAC key is the issuer's public RSA key (PEM, as a careless validator
// would hand its verification key to HMAC).
func hmacWithPublicKey(t *testing.T, pub *rsa.PublicKey, kid string, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	input := jwtSigningInput(map[string]any{"alg": "HS256", "typ": "at+jwt", "kid": kid}, claims)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// jwtSigningInput is base64url(header) "." base64url(claims).
func jwtSigningInput(header, claims map[string]any) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
}

// oauthConfig writes a troupe config whose [auth.oauth] trusts issuer and
// requires the scope mcp:read, with a leeway of one second (so the expired
// case waits little), and an audit log at audit; extra is appended.
func oauthConfig(t *testing.T, issuer, audit, extra string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	text := fmt.Sprintf(`[audit]
path = %q

[auth.oauth]
issuer = %q
required_scopes = ["mcp:read"]
leeway = "1s"
%s`, audit, issuer, extra)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// oauthAnswer is troupe's answer to one raw HTTP request.
type oauthAnswer struct {
	status int
	header http.Header
	body   []byte
}

// brief is the start of the answer's body, for failure messages.
func (a oauthAnswer) brief() string {
	const most = 400
	if len(a.body) > most {
		return string(a.body[:most]) + "…"
	}
	return string(a.body)
}

// modernToolsList sends a 2026-07-28 tools/list (one POST, no session) to
// target with the Authorization header auth ("" for none).
func modernToolsList(t *testing.T, target, auth string) oauthAnswer {
	t.Helper()
	return modernPost(t, target, auth, "tools/list", "", "")
}

// modernPost sends one 2026-07-28 request (one POST, no session) of method
// with params (JSON object members, "" for none) to target, with the
// Authorization header auth ("" for none); name is the Mcp-Name header of
// a tools/call.
func modernPost(t *testing.T, target, auth, method, name, params string) oauthAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(modernRequest("1", method, params)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := loopbackClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return oauthAnswer{status: resp.StatusCode, header: resp.Header, body: body}
}

// challengeParams parses a WWW-Authenticate: Bearer challenge's
// auth-params (name="value", ...); ok is false when it is not Bearer.
func challengeParams(h string) (params map[string]string, ok bool) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, false
	}
	params = map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimLeft(strings.TrimSpace(rest), ",") {
		name, value, found := strings.Cut(rest, "=")
		if !found {
			break
		}
		name = strings.TrimSpace(name)
		value = strings.TrimSpace(value)
		if strings.HasPrefix(value, `"`) {
			end := strings.Index(value[1:], `"`)
			if end < 0 {
				return params, true
			}
			params[name] = value[1 : end+1]
			rest = value[end+2:]
		} else {
			v, after, _ := strings.Cut(value, ",")
			params[name] = strings.TrimSpace(v)
			rest = after
		}
		rest = strings.TrimSpace(rest)
	}
	return params, true
}
