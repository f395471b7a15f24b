package auth

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzBearer reads arbitrary Authorization headers and query strings: no
// panic; a token comes back only from a Bearer header, trimmed and
// non-empty, never with a token in the query; a refusal never repeats
// what was sent.
func FuzzBearer(f *testing.F) {
	for _, seed := range [][2]string{
		{"Bearer abc", ""}, {"bearer  abc ", ""}, {"Basic dXNlcjpwdw==", ""}, {"Bearer", ""},
		{"", "access_token=abc"}, {"Bearer abc", "x=1&access_token="}, {"BEARER\tabc", ""}, {"Bearer a b", "%zz"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, header, query string) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.URL.RawQuery = query
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		token, refusal := Bearer(r)
		if (refusal == nil) == (token == "") {
			t.Fatalf("token %q with refusal %+v", token, refusal)
		}
		if refusal != nil {
			if refusal.Status != http.StatusUnauthorized {
				t.Fatalf("refusal status %d", refusal.Status)
			}
			// The messages name the header's form; nothing else of it.
			msg := strings.ReplaceAll(refusal.Message, "Authorization: Bearer <token>", "")
			_, sent, _ := strings.Cut(header, " ")
			if sent = strings.TrimSpace(sent); len(sent) >= 4 && strings.Contains(msg, sent) {
				t.Fatalf("the refusal %q repeats the header", refusal.Message)
			}
			return
		}
		if r.URL.Query().Has("access_token") {
			t.Fatal("a request with access_token in the query was accepted")
		}
		scheme, _, _ := strings.Cut(header, " ")
		if !strings.EqualFold(scheme, "Bearer") || token != strings.TrimSpace(token) || !strings.Contains(header, token) {
			t.Fatalf("header %q gave token %q", header, token)
		}
	})
}

// FuzzOAuthValidate feeds arbitrary token strings to a validator of a
// live test issuer: no panic, a 401 invalid_token for all but the valid
// seed, and nothing is accepted unless it is the seed's signed content
// (its header and claims, with a signature that decodes to the seed's).
func FuzzOAuthValidate(f *testing.F) {
	is := newTestIssuer(f, "")
	v, err := NewOAuth(OAuthOptions{Issuer: is.issuer, Audience: testAudience, FetchTimeout: 2 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	valid := is.sign("k1", "at+jwt", is.claims(time.Now()))
	input, sig, _ := strings.Cut(valid, ".")
	payload, sig, _ := strings.Cut(sig, ".")
	signed := input + "." + payload
	wantSig, _ := base64.RawURLEncoding.DecodeString(sig)
	for _, seed := range []string{valid, signed + ".", "a.b.c", "2YotnFZFEjr1zCsicMWpAA", "a.b.c.d.e",
		"eyJhbGciOiJub25lIn0.e30.", input + ".e30." + sig} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		who, refusal := v.Validate(context.Background(), token)
		if refusal == nil {
			got, _ := base64.RawURLEncoding.DecodeString(token[strings.LastIndexByte(token, '.')+1:])
			if !strings.HasPrefix(token, signed+".") || string(got) != string(wantSig) {
				t.Fatalf("a token without the issuer's signature was accepted as %+v", who)
			}
			return
		}
		if refusal.Status != http.StatusUnauthorized || refusal.Code != "invalid_token" {
			t.Fatalf("refusal %+v", refusal)
		}
		if len(token) >= 16 && strings.Contains(refusal.Message, token) {
			t.Fatalf("the refusal %q repeats the token", refusal.Message)
		}
	})
}
