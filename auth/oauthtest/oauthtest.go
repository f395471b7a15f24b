// Package oauthtest is an OAuth authorization server for tests, on
// loopback: RFC 8414 metadata, a JWKS of RSA keys that can be rotated, and
// signed JWT access tokens. It is what the HTTP front's and the app's
// tests validate tokens against; the e2e tests use a real authorization
// server instead.
package oauthtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Issuer is a running authorization server; its URL is the issuer.
type Issuer struct {
	// URL is the issuer identifier (http://127.0.0.1:port).
	URL string
	t   testing.TB
	srv *httptest.Server

	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey // by kid
	// JWKSFetches counts the requests for the JWKS.
	JWKSFetches atomic.Int64
}

// New starts an issuer with one key, "k1"; it stops with the test.
func New(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{t: t, keys: map[string]*rsa.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.URL, "jwks_uri": is.URL + "/jwks",
			"token_endpoint": is.URL + "/token", "grant_types_supported": []string{"client_credentials"}})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.JWKSFetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		set := jwk.NewSet()
		for kid, priv := range is.keys {
			k, err := jwk.PublicKeyOf(priv.Public())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_ = k.Set(jwk.KeyIDKey, kid)
			_ = k.Set(jwk.AlgorithmKey, jwa.RS256())
			_ = k.Set(jwk.KeyUsageKey, "sig")
			_ = set.AddKey(k)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	is.URL = is.srv.URL
	is.AddKey("k1")
	return is
}

// AddKey publishes a new RSA key under kid (a rotation).
func (is *Issuer) AddKey(kid string) {
	is.t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		is.t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = priv
	is.mu.Unlock()
}

// Claims are a valid access token's claims for audience: subject "alice",
// valid for an hour, with the given space-separated scope.
func (is *Issuer) Claims(audience, subject, scope string) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": is.URL, "sub": subject, "aud": []string{audience},
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "client_id": "test"}
	if scope != "" {
		c["scope"] = scope
	}
	return c
}

// Token signs claims as an RFC 9068 access token (typ at+jwt, RS256) with
// the key kid.
func (is *Issuer) Token(kid string, claims map[string]any) string {
	is.t.Helper()
	is.mu.Lock()
	priv := is.keys[kid]
	is.mu.Unlock()
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
	_ = h.Set(jws.TypeKey, "at+jwt")
	out, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), priv, jws.WithProtectedHeaders(h)))
	if err != nil {
		is.t.Fatal(err)
	}
	return string(out)
}
