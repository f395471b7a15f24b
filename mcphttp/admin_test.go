package mcphttp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// adminRig is a Handler with an Admin handler that names the path it
// served, and a count of the refusals OnRefused saw.
type adminRig struct {
	h       *Handler
	mu      sync.Mutex
	refused []int
}

func newAdminRig(token string, checkHost bool) *adminRig {
	a := &adminRig{}
	admin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("admin " + r.URL.Path))
	})
	a.h = New(nil, Options{BearerToken: token, CheckHost: checkHost, Admin: admin, Logger: testLogger(),
		OnRefused: func(status int) {
			a.mu.Lock()
			a.refused = append(a.refused, status)
			a.mu.Unlock()
		}})
	return a
}

// do serves one request; headers are name, value pairs.
func (a *adminRig) do(method, target string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.Host = "127.0.0.1:8080"
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	return w
}

func (a *adminRig) refusals() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.refused...)
}

// The operators' paths take the MCP endpoint's bearer token; a browser
// trades the token in /status?token= for an HttpOnly, SameSite=Strict
// cookie that is not the token, and is redirected to /status without it.
// Wrong or missing credentials are refused through the counted path, and
// a new token (a reload) invalidates the cookies of the old one.
func TestAdminPathsAuthentication(t *testing.T) {
	const token = "s3cret-token-value"
	a := newAdminRig(token, true)
	for _, path := range []string{"/metrics", "/status", "/status/"} {
		if w := a.do("GET", path); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", path, w.Code)
		}
		w := a.do("GET", path, "Authorization", "Bearer "+token)
		if w.Code != 200 || w.Body.String() != "admin "+path {
			t.Errorf("GET %s with the token: %d %q", path, w.Code, w.Body.String())
		}
		if w := a.do("GET", path, "Authorization", "Bearer wrong"); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, w.Code)
		}
	}
	if w := a.do("GET", "/status?token=wrong"); w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
		t.Errorf("a wrong token in the query: %d, cookies %v", w.Code, w.Result().Cookies())
	}

	w := a.do("GET", "/status?token="+token)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/status" {
		t.Fatalf("token exchange: %d, Location %q; want 303 to /status", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("token exchange set cookies %v, want one", cookies)
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Value == "" ||
		strings.Contains(c.Value, token) {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ and a value that is not the token", c)
	}
	if strings.Contains(w.Body.String(), token) {
		t.Fatal("the redirect's body shows the token")
	}
	for _, path := range []string{"/status", "/status/", "/metrics"} {
		w := a.do("GET", path, "Cookie", c.Name+"="+c.Value)
		if w.Code != 200 || w.Body.String() != "admin "+path {
			t.Errorf("GET %s with the cookie: %d %q", path, w.Code, w.Body.String())
		}
	}
	if w := a.do("GET", "/status", "Cookie", c.Name+"=forged"); w.Code != http.StatusUnauthorized {
		t.Errorf("a forged cookie: %d, want 401", w.Code)
	}
	if w := a.do("GET", "/status", "Cookie", c.Name+"="+c.Value, "Authorization", "Bearer wrong"); w.Code != http.StatusUnauthorized {
		t.Errorf("a wrong bearer beside a good cookie: %d, want 401", w.Code)
	}

	a.h.SetBearerToken("rotated-token")
	if w := a.do("GET", "/status", "Cookie", c.Name+"="+c.Value); w.Code != http.StatusUnauthorized {
		t.Errorf("the old token's cookie after a rotation: %d, want 401", w.Code)
	}

	for _, bad := range [][]string{
		{"POST", "/status", "Authorization", "Bearer rotated-token"},
		{"GET", "/status", "Authorization", "Bearer rotated-token", "Origin", "https://evil.example"},
	} {
		if w := a.do(bad[0], bad[1], bad[2:]...); w.Code < 400 {
			t.Errorf("%v: %d, want a refusal", bad, w.Code)
		}
	}
	req := httptest.NewRequest("GET", "/status", nil)
	req.Host = "rebind.example"
	req.Header.Set("Authorization", "Bearer rotated-token")
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("a foreign Host: %d, want 403", rec.Code)
	}
	if got := len(a.refusals()); got < 12 {
		t.Errorf("OnRefused saw %d refusals, want every one (>= 12)", got)
	}
}

// Without a token (loopback without auth) the operators' paths are open,
// as the MCP endpoint is; without Admin they do not exist.
func TestAdminPathsWithoutToken(t *testing.T) {
	a := newAdminRig("", false)
	if w := a.do("GET", "/status/"); w.Code != 200 || w.Body.String() != "admin /status/" {
		t.Errorf("no token: %d %q", w.Code, w.Body.String())
	}
	h := New(nil, Options{Logger: testLogger()})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("no Admin: /metrics answered %d, want 404", w.Code)
	}
}
