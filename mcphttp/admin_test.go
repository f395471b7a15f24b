package mcphttp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
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
// cookie for the status page that is not the token, and is redirected to
// /status without it.
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
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/status" || c.Value == "" ||
		strings.Contains(c.Value, token) {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/status and a value that is not the token", c)
	}
	if strings.Contains(w.Body.String(), token) {
		t.Fatal("the redirect's body shows the token")
	}
	for _, path := range []string{"/status", "/status/"} {
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

// login trades the token for a status cookie and returns it.
func (a *adminRig) login(t *testing.T, token string) *http.Cookie {
	t.Helper()
	w := a.do("GET", "/status?token="+token)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("token exchange: %d, want 303", w.Code)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("token exchange set cookies %v, want one", cookies)
	}
	return cookies[0]
}

// Each login mints its own random cookie, kept by the server: two logins
// with the same token get different values that both work, the cookie is
// scoped to the status page (Path=/status) with a Max-Age, and a value
// derived from the token the way earlier versions did is not accepted.
func TestStatusCookieIsPerLogin(t *testing.T) {
	const token = "s3cret-token-value"
	a := newAdminRig(token, true)
	first, second := a.login(t, token), a.login(t, token)
	if first.Value == second.Value {
		t.Fatalf("two logins got the same cookie value %q: it must be random per login", first.Value)
	}
	for _, c := range []*http.Cookie{first, second} {
		if c.Path != "/status" || c.MaxAge <= 0 || c.MaxAge > int(statusLoginTTL/time.Second) ||
			!c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure {
			t.Errorf("cookie %+v: want Path=/status, 0 < Max-Age <= %v, HttpOnly, SameSite=Strict, not Secure over plain HTTP",
				c, statusLoginTTL)
		}
		if len(c.Value) < 43 { // 32 random bytes, base64url or hex
			t.Errorf("cookie value %q is too short for 32 random bytes", c.Value)
		}
		for _, path := range []string{"/status", "/status/"} {
			if w := a.do("GET", path, "Cookie", c.Name+"="+c.Value); w.Code != 200 {
				t.Errorf("GET %s with a login's cookie: %d, want 200", path, w.Code)
			}
		}
		// The cookie is the status page's: /metrics is for scrapers with
		// the bearer header, and a browser does not send it there.
		if w := a.do("GET", "/metrics", "Cookie", c.Name+"="+c.Value); w.Code != http.StatusUnauthorized {
			t.Errorf("GET /metrics with the status cookie: %d, want 401", w.Code)
		}
	}
	req := httptest.NewRequest("GET", "https://127.0.0.1:8443/status?token="+token, nil)
	req.Host = "127.0.0.1:8443"
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	if cs := w.Result().Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("a login over TLS set %v, want one Secure cookie", cs)
	}
	sum := sha256.Sum256([]byte(token))
	m := hmac.New(sha256.New, sum[:])
	m.Write([]byte("troupe status page cookie v1"))
	derived := hex.EncodeToString(m.Sum(nil))
	if w := a.do("GET", "/status", "Cookie", statusCookie+"="+derived); w.Code != http.StatusUnauthorized {
		t.Errorf("a cookie derived from the token: %d, want 401", w.Code)
	}
}

// A login's cookie expires: after its lifetime the server refuses it
// (401) even though the browser may still send it, and a new login works.
func TestStatusCookieExpires(t *testing.T) {
	const token = "s3cret-token-value"
	a := newAdminRig(token, true)
	now := time.Now()
	a.h.logins.now = func() time.Time { return now }
	c := a.login(t, token)
	now = now.Add(statusLoginTTL - time.Minute)
	if w := a.do("GET", "/status/", "Cookie", c.Name+"="+c.Value); w.Code != 200 {
		t.Fatalf("a cookie within its lifetime: %d, want 200", w.Code)
	}
	now = now.Add(2 * time.Minute)
	w := a.do("GET", "/status/", "Cookie", c.Name+"="+c.Value)
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "expired") {
		t.Fatalf("an expired cookie: %d %q, want 401 saying it expired", w.Code, w.Body.String())
	}
	fresh := a.login(t, token)
	if w := a.do("GET", "/status/", "Cookie", fresh.Name+"="+fresh.Value); w.Code != 200 {
		t.Errorf("a new login after expiry: %d, want 200", w.Code)
	}
}

// Logins are bounded: whoever holds the token cannot grow the server's
// memory by logging in again and again; past the bound the oldest login
// goes, and the newest ones keep working.
func TestStatusLoginsBounded(t *testing.T) {
	const token = "s3cret-token-value"
	a := newAdminRig(token, true)
	oldest := a.login(t, token)
	var last *http.Cookie
	for range 10 * maxStatusLogins {
		last = a.login(t, token)
	}
	if n := a.h.logins.len(); n > maxStatusLogins {
		t.Fatalf("%d logins kept, want at most %d", n, maxStatusLogins)
	}
	if w := a.do("GET", "/status/", "Cookie", oldest.Name+"="+oldest.Value); w.Code != http.StatusUnauthorized {
		t.Errorf("the oldest login past the bound: %d, want 401", w.Code)
	}
	if w := a.do("GET", "/status/", "Cookie", last.Name+"="+last.Value); w.Code != 200 {
		t.Errorf("the newest login: %d, want 200", w.Code)
	}
}
