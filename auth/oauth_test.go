package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"troupe/identity"
)

const testAudience = "http://127.0.0.1:8080/mcp"

// testIssuer is an authorization server on loopback: RFC 8414 metadata
// (or OpenID discovery under a path) and a JWKS, with keys that can be
// rotated and a count of the JWKS fetches.
type testIssuer struct {
	t   testing.TB
	srv *httptest.Server
	// issuer is what tokens and the metadata name.
	issuer string

	mu         sync.Mutex
	keys       map[string]any // kid → private key
	metaIssuer string         // what the metadata claims ("" = issuer)
	failing    bool           // answer 500 to everything

	jwksHits atomic.Int64
}

// newTestIssuer starts an issuer at root ("" or a path such as
// "/realms/acme", discovered through OpenID's appended well-known path).
func newTestIssuer(t testing.TB, path string) *testIssuer {
	t.Helper()
	is := &testIssuer{t: t, keys: map[string]any{}}
	mux := http.NewServeMux()
	meta := func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		claimed, failing := is.metaIssuer, is.failing
		is.mu.Unlock()
		if failing {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		if claimed == "" {
			claimed = is.issuer
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": claimed, "jwks_uri": is.srv.URL + "/jwks"})
	}
	if path == "" {
		mux.HandleFunc("/.well-known/oauth-authorization-server", meta)
	} else {
		mux.HandleFunc(path+"/.well-known/openid-configuration", meta)
	}
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.jwksHits.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		if is.failing {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		set := jwk.NewSet()
		for kid, priv := range is.keys {
			k, err := jwk.PublicKeyOf(priv)
			if err != nil {
				t.Error(err)
				return
			}
			_ = k.Set(jwk.KeyIDKey, kid)
			_ = set.AddKey(k)
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	is.issuer = is.srv.URL + path
	is.addRSA("k1")
	return is
}

func (is *testIssuer) addRSA(kid string) *rsa.PrivateKey {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		is.t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = priv
	is.mu.Unlock()
	return priv
}

func (is *testIssuer) addEC(kid string) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		is.t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = priv
	is.mu.Unlock()
}

func (is *testIssuer) set(f func()) {
	is.mu.Lock()
	defer is.mu.Unlock()
	f()
}

// claims are a valid token's claims at now; edit them per case.
func (is *testIssuer) claims(now time.Time) map[string]any {
	return map[string]any{
		"iss": is.issuer, "sub": "alice", "aud": []string{testAudience},
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix(),
		"scope": "mcp:read mcp:write", "client_id": "c1",
	}
}

// sign signs claims with the key kid, RS256 (or ES256 for an EC key),
// with typ in the protected header ("" leaves it out).
func (is *testIssuer) sign(kid, typ string, claims map[string]any) string {
	is.t.Helper()
	is.mu.Lock()
	priv := is.keys[kid]
	is.mu.Unlock()
	alg := jwa.RS256()
	if _, ok := priv.(*ecdsa.PrivateKey); ok {
		alg = jwa.ES256()
	}
	return is.signWith(alg, priv, kid, typ, claims)
}

func (is *testIssuer) signWith(alg jwa.SignatureAlgorithm, key any, kid, typ string, claims map[string]any) string {
	is.t.Helper()
	b := jwt.NewBuilder()
	for k, v := range claims {
		b = b.Claim(k, v)
	}
	tok, err := b.Build()
	if err != nil {
		is.t.Fatal(err)
	}
	h := jws.NewHeaders()
	_ = h.Set(jws.KeyIDKey, kid)
	if typ != "" {
		_ = h.Set(jws.TypeKey, typ)
	}
	out, err := jwt.Sign(tok, jwt.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	if err != nil {
		is.t.Fatal(err)
	}
	return string(out)
}

// handmade builds a token from a header and claims, with sig as its
// signature: tokens no library would sign (alg none, HMAC by the public key).
func handmade(header, claims map[string]any, sign func(input []byte) []byte) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign([]byte(input)))
}

// clock is a settable clock for the validator.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newValidator(t *testing.T, is *testIssuer, edit func(*OAuthOptions)) (*OAuthValidator, *clock) {
	t.Helper()
	c := &clock{now: time.Now()}
	o := OAuthOptions{Issuer: is.issuer, Audience: testAudience, Now: c.Now, MinRefresh: 10 * time.Second}
	if edit != nil {
		edit(&o)
	}
	v, err := NewOAuth(o)
	if err != nil {
		t.Fatal(err)
	}
	return v, c
}

// refused checks a refusal: its status, its code, a phrase of its
// message, and that the message holds nothing of the token.
func refused(t *testing.T, token string, who *identity.Identity, r *Refusal, status int, code, phrase string) {
	t.Helper()
	if r == nil {
		t.Fatalf("accepted as %+v; want refused (%s)", who, phrase)
	}
	if r.Status != status || r.Code != code || !strings.Contains(r.Message, phrase) {
		t.Fatalf("refusal = %+v; want %d %s containing %q", r, status, code, phrase)
	}
	for _, part := range strings.Split(token, ".") {
		if len(part) > 8 && strings.Contains(r.Message, part) {
			t.Fatalf("the refusal %q holds part of the token", r.Message)
		}
	}
}

func TestOAuthValidToken(t *testing.T) {
	is := newTestIssuer(t, "")
	v, c := newValidator(t, is, nil)
	for _, typ := range []string{"at+jwt", "application/at+jwt", "JWT", ""} {
		tok := is.sign("k1", typ, is.claims(c.Now()))
		who, r := v.Validate(context.Background(), tok)
		if r != nil {
			t.Fatalf("typ %q: refused: %+v", typ, r)
		}
		if who.Kind != identity.OAuth || who.Issuer != is.issuer || who.Name != "alice" ||
			strings.Join(who.Scopes, " ") != "mcp:read mcp:write" || who.Tools != nil || who.Operator {
			t.Fatalf("typ %q: identity = %+v", typ, who)
		}
	}
	if n := is.jwksHits.Load(); n != 1 {
		t.Fatalf("the JWKS was fetched %d times for 4 tokens of one key; want once (cached)", n)
	}
}

func TestOAuthRefusesBadClaims(t *testing.T) {
	is := newTestIssuer(t, "")
	v, c := newValidator(t, is, nil)
	now := c.Now()
	cases := []struct {
		name   string
		edit   func(map[string]any)
		phrase string
	}{
		{"wrong audience", func(m map[string]any) { m["aud"] = []string{"https://other.example/mcp"} }, "aud"},
		{"no audience", func(m map[string]any) { delete(m, "aud") }, "aud"},
		{"expired", func(m map[string]any) { m["exp"] = now.Add(-time.Minute).Unix() }, "expired"},
		{"no exp", func(m map[string]any) { delete(m, "exp") }, "exp"},
		{"nbf in the future", func(m map[string]any) { m["nbf"] = now.Add(time.Minute).Unix() }, "nbf"},
		{"iat in the future", func(m map[string]any) { m["iat"] = now.Add(time.Minute).Unix() }, "iat"},
		{"wrong issuer", func(m map[string]any) { m["iss"] = "https://evil.example" }, "issuer"},
		{"no subject", func(m map[string]any) { delete(m, "sub") }, "sub"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claims := is.claims(now)
			tc.edit(claims)
			tok := is.sign("k1", "at+jwt", claims)
			who, r := v.Validate(context.Background(), tok)
			refused(t, tok, who, r, 401, "invalid_token", tc.phrase)
		})
	}
}

func TestOAuthLeeway(t *testing.T) {
	is := newTestIssuer(t, "")
	v, c := newValidator(t, is, nil) // default leeway 5 s
	now := c.Now()
	claims := is.claims(now)
	claims["exp"] = now.Add(-3 * time.Second).Unix()
	claims["nbf"] = now.Add(3 * time.Second).Unix()
	if _, r := v.Validate(context.Background(), is.sign("k1", "", claims)); r != nil {
		t.Fatalf("a token 3 s out of date was refused within the default leeway of 5 s: %+v", r)
	}
	claims["exp"] = now.Add(-8 * time.Second).Unix()
	tok := is.sign("k1", "", claims)
	who, r := v.Validate(context.Background(), tok)
	refused(t, tok, who, r, 401, "invalid_token", "expired")

	wide, _ := newValidator(t, is, func(o *OAuthOptions) { o.Leeway = 30 * time.Second; o.Now = c.Now })
	if _, r := wide.Validate(context.Background(), tok); r != nil {
		t.Fatalf("a token 8 s out of date was refused with a leeway of 30 s: %+v", r)
	}
}

func TestOAuthRefusesForgedSignatures(t *testing.T) {
	is := newTestIssuer(t, "")
	v, c := newValidator(t, is, nil)
	claims := is.claims(c.Now())

	none := handmade(map[string]any{"alg": "none", "kid": "k1", "typ": "at+jwt"}, claims,
		func([]byte) []byte { return nil })
	who, r := v.Validate(context.Background(), none)
	refused(t, none, who, r, 401, "invalid_token", `algorithm "none"`)

	// The issuer's public key, as an attacker could fetch it, used as an
	// HMAC secret in each form a naive verifier might take it in.
	pub := is.keys["k1"].(*rsa.PrivateKey).Public()
	der, _ := x509.MarshalPKIXPublicKey(pub)
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	pubJWK, _ := jwk.PublicKeyOf(pub)
	jwkBytes, _ := json.Marshal(pubJWK)
	for _, secret := range [][]byte{der, pemBytes, jwkBytes} {
		hs := handmade(map[string]any{"alg": "HS256", "kid": "k1", "typ": "at+jwt"}, claims, func(in []byte) []byte {
			m := hmac.New(sha256.New, secret)
			m.Write(in)
			return m.Sum(nil)
		})
		who, r := v.Validate(context.Background(), hs)
		refused(t, hs, who, r, 401, "invalid_token", `algorithm "HS256"`)
	}

	// A valid token with its payload changed.
	good := is.sign("k1", "at+jwt", claims)
	parts := strings.Split(good, ".")
	claims["sub"] = "mallory"
	forged := strings.Split(is.sign("k1", "at+jwt", claims), ".")
	tampered := parts[0] + "." + forged[1] + "." + parts[2]
	who, r = v.Validate(context.Background(), tampered)
	refused(t, tampered, who, r, 401, "invalid_token", "signature")

	// A key troupe does not know, with the kid of one it does.
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	stranger := is.signWith(jwa.RS256(), other, "k1", "at+jwt", is.claims(c.Now()))
	who, r = v.Validate(context.Background(), stranger)
	refused(t, stranger, who, r, 401, "invalid_token", "signature")

	// An EC signature claimed for an RSA key's kid.
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mismatch := is.signWith(jwa.ES256(), ec, "k1", "at+jwt", is.claims(c.Now()))
	who, r = v.Validate(context.Background(), mismatch)
	refused(t, mismatch, who, r, 401, "invalid_token", "type RSA")

	// No kid at all.
	nokid := is.signWith(jwa.RS256(), is.keys["k1"], "", "at+jwt", is.claims(c.Now()))
	who, r = v.Validate(context.Background(), nokid)
	refused(t, nokid, who, r, 401, "invalid_token", "no kid")

	// Another kind of token (an ID token's or a logout token's type).
	idtok := is.sign("k1", "logout+jwt", is.claims(c.Now()))
	who, r = v.Validate(context.Background(), idtok)
	refused(t, idtok, who, r, 401, "invalid_token", "type")
}

func TestOAuthECKeys(t *testing.T) {
	is := newTestIssuer(t, "")
	is.addEC("e1")
	v, c := newValidator(t, is, nil)
	if _, r := v.Validate(context.Background(), is.sign("e1", "at+jwt", is.claims(c.Now()))); r != nil {
		t.Fatalf("an ES256 token was refused: %+v", r)
	}
}

func TestOAuthOpaqueAndMalformedTokens(t *testing.T) {
	is := newTestIssuer(t, "")
	v, _ := newValidator(t, is, nil)
	for token, phrase := range map[string]string{
		"2YotnFZFEjr1zCsicMWpAA":             "opaque access tokens are not supported",
		"a.b.c.d.e":                          "encrypted",
		"!!!.e30.sig":                        "not a JWT",
		strings.Repeat("x", maxTokenBytes+1): "too large",
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"k1"}`)) + ".bm90IGpzb24.c2ln": "",
	} {
		who, r := v.Validate(context.Background(), token)
		refused(t, token, who, r, 401, "invalid_token", phrase)
	}
	if n := is.jwksHits.Load(); n > 1 {
		t.Fatalf("malformed tokens fetched the JWKS %d times", n)
	}
}

func TestOAuthScopes(t *testing.T) {
	is := newTestIssuer(t, "")
	v, c := newValidator(t, is, func(o *OAuthOptions) {
		o.RequiredScopes = []string{"mcp:read"}
		o.Scopes = map[string][]string{"mcp:read": {"repo.*", "docs.fetch"}, "mcp:write": {"repo.*", "shell"}, "admin": {"*"}}
		o.OperatorScopes = []string{"admin"}
	})
	claims := is.claims(c.Now())
	claims["scope"] = "mcp:write"
	tok := is.sign("k1", "at+jwt", claims)
	who, r := v.Validate(context.Background(), tok)
	refused(t, tok, who, r, 403, "insufficient_scope", "mcp:read")
	if r.Scope != "mcp:read" {
		t.Fatalf("insufficient_scope names the scope %q; want mcp:read", r.Scope)
	}

	delete(claims, "scope")
	claims["scp"] = []string{"mcp:read", "mcp:write"}
	who, r = v.Validate(context.Background(), is.sign("k1", "at+jwt", claims))
	if r != nil {
		t.Fatalf("a token with scp [mcp:read mcp:write] was refused: %+v", r)
	}
	if who.Tools == nil || strings.Join(who.Tools.Allow, ",") != "repo.*,docs.fetch,shell" || who.Operator {
		t.Fatalf("identity = %+v, tools %+v; want the union of the scopes' globs, not operator", who, who.Tools)
	}
	if !who.Tools.Allows("repo.read") || who.Tools.Allows("codex") {
		t.Fatal("the grant does not follow the scopes' globs")
	}

	claims["scp"] = []string{"mcp:read", "admin"}
	who, r = v.Validate(context.Background(), is.sign("k1", "at+jwt", claims))
	if r != nil || !who.Operator {
		t.Fatalf("a token with the operator scope: %+v %+v; want an operator", who, r)
	}
	if got := v.ScopesSupported(); strings.Join(got, " ") != "admin mcp:read mcp:write" {
		t.Fatalf("ScopesSupported = %v", got)
	}
}

func TestOAuthSubjectClaim(t *testing.T) {
	is := newTestIssuer(t, "")
	v, c := newValidator(t, is, func(o *OAuthOptions) { o.SubjectClaim = "preferred_username" })
	claims := is.claims(c.Now())
	claims["preferred_username"] = "bob"
	who, r := v.Validate(context.Background(), is.sign("k1", "", claims))
	if r != nil || who.Name != "bob" {
		t.Fatalf("subject_claim preferred_username: %+v %+v; want bob", who, r)
	}
	delete(claims, "preferred_username")
	tok := is.sign("k1", "", claims)
	who, r = v.Validate(context.Background(), tok)
	refused(t, tok, who, r, 401, "invalid_token", "preferred_username")
}

func TestOAuthKeyRotationAndRefreshRateLimit(t *testing.T) {
	is := newTestIssuer(t, "")
	v, c := newValidator(t, is, nil) // MinRefresh 10 s
	if _, r := v.Validate(context.Background(), is.sign("k1", "", is.claims(c.Now()))); r != nil {
		t.Fatal(r)
	}
	if n := is.jwksHits.Load(); n != 1 {
		t.Fatalf("JWKS fetches = %d; want 1", n)
	}

	// A flood of tokens with made-up kids, at once and in a row: at most
	// one fetch per interval.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The issuer's key under a made-up kid: a forged header.
			tok := is.signWith(jwa.RS256(), is.keys["k1"], fmt.Sprintf("random-%d", i), "", is.claims(c.Now()))
			who, r := v.Validate(context.Background(), tok)
			if r == nil {
				t.Errorf("a token of an unknown kid was accepted as %+v", who)
			}
		}()
	}
	wg.Wait()
	if n := is.jwksHits.Load(); n != 1 {
		t.Fatalf("a flood of unknown kids within the interval fetched the JWKS %d times in all; want 1", n)
	}

	// The issuer rotates to k2: within the interval its tokens wait...
	is.addRSA("k2")
	tok := is.sign("k2", "at+jwt", is.claims(c.Now()))
	who, r := v.Validate(context.Background(), tok)
	refused(t, tok, who, r, 401, "invalid_token", "kid")
	// ...and once it has passed, one fetch finds the new key.
	c.advance(11 * time.Second)
	if _, r := v.Validate(context.Background(), is.sign("k2", "at+jwt", is.claims(c.Now()))); r != nil {
		t.Fatalf("after the interval, the rotated key's token was refused: %+v", r)
	}
	if n := is.jwksHits.Load(); n != 2 {
		t.Fatalf("JWKS fetches = %d; want 2", n)
	}
	for range 20 {
		_, _ = v.Validate(context.Background(), is.signWith(jwa.RS256(), is.keys["k1"], "nope", "", is.claims(c.Now())))
	}
	if n := is.jwksHits.Load(); n != 2 {
		t.Fatalf("JWKS fetches = %d after more unknown kids within the interval; want 2", n)
	}

	// Keys older than MaxAge are fetched again: a withdrawn key stops working.
	withdrawn := is.sign("k1", "", is.claims(c.Now().Add(16*time.Minute)))
	is.set(func() { delete(is.keys, "k1") })
	c.advance(16 * time.Minute)
	who, r = v.Validate(context.Background(), withdrawn)
	refused(t, withdrawn, who, r, 401, "invalid_token", "kid")
	if _, r := v.Validate(context.Background(), is.sign("k2", "", is.claims(c.Now()))); r != nil {
		t.Fatal(r)
	}
}

func TestOAuthIssuerProblems(t *testing.T) {
	t.Run("metadata names another issuer", func(t *testing.T) {
		is := newTestIssuer(t, "")
		is.set(func() { is.metaIssuer = "https://evil.example" })
		v, c := newValidator(t, is, nil)
		tok := is.sign("k1", "", is.claims(c.Now()))
		who, r := v.Validate(context.Background(), tok)
		refused(t, tok, who, r, 401, "invalid_token", `names the issuer "https://evil.example"`)
		if is.jwksHits.Load() != 0 {
			t.Fatal("the JWKS of an issuer whose metadata names another was fetched")
		}
	})
	t.Run("unreachable, then back", func(t *testing.T) {
		is := newTestIssuer(t, "")
		is.set(func() { is.failing = true })
		v, c := newValidator(t, is, nil) // no fetch at start: no error here
		tok := is.sign("k1", "", is.claims(c.Now()))
		who, r := v.Validate(context.Background(), tok)
		refused(t, tok, who, r, 401, "invalid_token", "the OAuth issuer "+is.issuer+" could not be used")
		is.set(func() { is.failing = false })
		who, r = v.Validate(context.Background(), tok) // within the interval: not asked again
		refused(t, tok, who, r, 401, "invalid_token", "could not be used")
		c.advance(11 * time.Second)
		if _, r := v.Validate(context.Background(), tok); r != nil {
			t.Fatalf("once the issuer is back and the interval passed, the token was refused: %+v", r)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		is := newTestIssuer(t, "")
		v, c := newValidator(t, is, func(o *OAuthOptions) { o.FetchTimeout = 2 * time.Second })
		tok := is.sign("k1", "", is.claims(c.Now()))
		is.srv.Close()
		who, r := v.Validate(context.Background(), tok)
		refused(t, tok, who, r, 401, "invalid_token", "could not be used")
	})
	t.Run("OpenID discovery under a path", func(t *testing.T) {
		is := newTestIssuer(t, "/realms/acme")
		v, c := newValidator(t, is, nil)
		if _, r := v.Validate(context.Background(), is.sign("k1", "", is.claims(c.Now()))); r != nil {
			t.Fatalf("an issuer found through OpenID discovery: %+v", r)
		}
	})
}

func TestCheckIssuerURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://kc.example/realms/acme": true,
		"http://127.0.0.1:8080":          true,
		"http://127.1.2.3":               true,
		"http://[::1]:9000/x":            true,
		"http://localhost:3000":          true,
		"http://kc.example":              false,
		"http://10.0.0.1":                false,
		"ftp://kc.example":               false,
		"kc.example":                     false,
		"https://kc.example/?q=1":        false,
		"https://kc.example/#f":          false,
	} {
		if err := CheckIssuerURL(raw); (err == nil) != ok {
			t.Errorf("CheckIssuerURL(%q) = %v; want ok=%v", raw, err, ok)
		}
	}
	if _, err := NewOAuth(OAuthOptions{Issuer: "http://kc.example", Audience: testAudience}); err == nil ||
		!strings.Contains(err.Error(), "https") {
		t.Fatalf("NewOAuth with an http:// issuer off loopback: %v", err)
	}
	if _, err := NewOAuth(OAuthOptions{Issuer: "https://kc.example"}); err == nil {
		t.Fatal("NewOAuth without an audience was accepted")
	}
}
