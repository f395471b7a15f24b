package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"troupe/identity"
)

// TestChainFindsTheNamedToken checks that each token names its holder,
// that an unknown or missing credential is refused with the RFC 6750 code
// that fits, and that a chain without tokens asks for nothing.
func TestChainFindsTheNamedToken(t *testing.T) {
	c := &Chain{Tokens: NewTokens([]StaticToken{
		{Name: "alice", Token: "a-secret"},
		{Name: "bob", Token: "b-secret", Tools: &identity.Grant{Allow: []string{"repo.*"}}},
		{Name: "empty", Token: ""},
	})}
	req := func(header ...string) *http.Request {
		r := httptest.NewRequest("POST", "/mcp", nil)
		for _, h := range header {
			r.Header.Add("Authorization", h)
		}
		return r
	}
	for _, tc := range []struct {
		header []string
		name   string
		code   string
		status int
	}{
		{header: []string{"Bearer a-secret"}, name: "alice"},
		{header: []string{"bearer  b-secret "}, name: "bob"},
		{header: []string{"Bearer wrong"}, code: "invalid_token", status: 401},
		{header: []string{"Bearer "}, status: 401},
		{header: []string{"Basic YTpi"}, status: 401},
		{status: 401},
		{header: []string{"Bearer a-secret", "Bearer b-secret"}, code: "invalid_request", status: 401},
	} {
		id, refusal := c.Authenticate(req(tc.header...))
		switch {
		case tc.name != "" && (refusal != nil || id.Kind != identity.Token || id.Name != tc.name):
			t.Errorf("%q: %+v %+v, want %s", tc.header, id, refusal, tc.name)
		case tc.name == "" && (refusal == nil || refusal.Code != tc.code || refusal.Status != tc.status):
			t.Errorf("%q: %+v, want %d %q", tc.header, refusal, tc.status, tc.code)
		}
	}
	if id, _ := c.Authenticate(req("Bearer b-secret")); id.Tools.Allows("run") {
		t.Error("bob's grant was lost")
	}
	r := httptest.NewRequest("POST", "/mcp?access_token=a-secret", nil)
	if _, refusal := c.Authenticate(r); refusal == nil || refusal.Code != "invalid_request" {
		t.Errorf("a token in the query string: %+v", refusal)
	}
	if c.Tokens.Len() != 2 {
		t.Errorf("an empty token was kept: %v", c.Tokens.Names())
	}
	var open Chain
	if id, refusal := open.Authenticate(req()); refusal != nil || id.Kind != identity.Anonymous {
		t.Errorf("a chain without tokens: %+v %+v", id, refusal)
	}
}
