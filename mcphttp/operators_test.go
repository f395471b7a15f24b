package mcphttp

import (
	"net/http"
	"testing"

	"troupe/auth"
)

// With operators named, the operators' paths serve only them: a tenant's
// valid token gets 403 on /metrics, /status and /status/, in the header or
// traded for a cookie (no login is made for it), and an operator's login
// dies when a reload gives its token to another name.
func TestAdminPathsNeedAnOperator(t *testing.T) {
	a := newAdminRig("unused", true)
	a.h.SetAuth(&auth.Chain{Tokens: auth.NewTokens([]auth.StaticToken{
		{Name: "ops", Token: "ops-token", Operator: true},
		{Name: "alice", Token: "alice-token"},
	})})
	for _, path := range []string{"/metrics", "/status", "/status/"} {
		if w := a.do("GET", path, "Authorization", "Bearer alice-token"); w.Code != http.StatusForbidden ||
			w.Body.String() == "admin "+path {
			t.Errorf("GET %s as a tenant: %d %q, want 403", path, w.Code, w.Body.String())
		}
		if w := a.do("GET", path, "Authorization", "Bearer ops-token"); w.Code != 200 || w.Body.String() != "admin "+path {
			t.Errorf("GET %s as the operator: %d %q", path, w.Code, w.Body.String())
		}
	}
	if w := a.do("GET", "/status?token=alice-token"); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Errorf("a tenant's login: %d, cookies %v; want 403 and none", w.Code, w.Result().Cookies())
	}
	c := a.login(t, "ops-token")
	if w := a.do("GET", "/status/", "Cookie", c.Name+"="+c.Value); w.Code != 200 {
		t.Fatalf("the operator's cookie: %d", w.Code)
	}
	// The same token, now a tenant's under another name: the login carried
	// the identity, so it ends.
	a.h.SetAuth(&auth.Chain{Tokens: auth.NewTokens([]auth.StaticToken{{Name: "renamed", Token: "ops-token", Operator: true}})})
	if w := a.do("GET", "/status/", "Cookie", c.Name+"="+c.Value); w.Code != http.StatusUnauthorized {
		t.Errorf("a login after its token was renamed: %d, want 401", w.Code)
	}
	// The same name, no longer an operator: its login no longer serves.
	c = a.login(t, "ops-token")
	a.h.SetAuth(&auth.Chain{Tokens: auth.NewTokens([]auth.StaticToken{{Name: "renamed", Token: "ops-token"}})})
	if w := a.do("GET", "/status/", "Cookie", c.Name+"="+c.Value); w.Code != http.StatusForbidden {
		t.Errorf("a login of an identity no longer an operator: %d, want 403", w.Code)
	}
}
