package mcphttp

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
)

// The operators' paths served beside MCP when Options.Admin is set: the
// Prometheus metrics, the status page and the page's JSON. They sit behind
// the MCP endpoint's own checks (Host, Origin, bearer token), so exposing
// them needs no second secret.
const (
	adminMetrics    = "/metrics"
	adminStatus     = "/status"
	adminStatusJSON = "/status/"
)

// IsAdminPath reports whether path is one of the operators' paths the
// Handler serves with Options.Admin (/metrics, /status, /status/): the
// MCP endpoint must not be one of them.
func IsAdminPath(path string) bool {
	return path == adminMetrics || path == adminStatus || path == adminStatusJSON
}

// statusCookie is the cookie a browser gets for the operators' paths in
// exchange for a token in /status?token=…. A browser sends no bearer
// header, so the cookie stands in for it; its value is a MAC derived from
// the token (never the token itself), so a page script or a stolen cookie
// jar never yields the token, and changing the token (SetBearerToken on a
// reload) invalidates every cookie issued for the old one.
const statusCookie = "troupe_status"

// statusCookieLabel is what the cookie's MAC is computed over; a version
// in it lets a later format invalidate today's cookies.
const statusCookieLabel = "troupe status page cookie v1"

// serveAdmin serves Options.Admin's paths: loopback Host and allowed
// Origin as on the MCP endpoint, GET or HEAD only, then the bearer token
// (in the Authorization header, or as the status cookie). A GET of
// /status?token=<token> with the right token sets the cookie and redirects
// to /status without the query, so the token leaves the address bar and
// the history. Every refusal goes through deny (logged, counted).
func (h *Handler) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if !h.checkSource(w, r) {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.refuse(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	want := h.token.Load()
	if want == nil {
		h.opts.Admin.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == adminStatus && r.URL.Query().Has("token") {
		h.exchangeToken(w, r, want)
		return
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		// A bearer header decides alone: a wrong one is refused even
		// beside a good cookie, as on the MCP endpoint.
		if _, ok := h.authenticate(w, r); ok {
			h.opts.Admin.ServeHTTP(w, r)
		}
		return
	}
	if c, err := r.Cookie(statusCookie); err == nil {
		good := cookieValue(want)
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(good)) == 1 {
			h.opts.Admin.ServeHTTP(w, r)
			return
		}
		h.deny(w, r, http.StatusUnauthorized, "the status cookie is not valid (the token changed?): open /status?token=<token> again")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="troupe"`)
	h.deny(w, r, http.StatusUnauthorized, "authentication required: send Authorization: Bearer <token>, "+
		"or open /status?token=<token> in a browser")
}

// exchangeToken checks the token of /status?token=… in constant time and,
// when it fits, sets the status cookie and redirects (303) to /status.
func (h *Handler) exchangeToken(w http.ResponseWriter, r *http.Request, want *[32]byte) {
	got := sha256.Sum256([]byte(r.URL.Query().Get("token")))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		h.deny(w, r, http.StatusUnauthorized, "invalid token in /status?token=")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     statusCookie,
		Value:    cookieValue(want),
		Path:     "/",
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Location", adminStatus)
	w.WriteHeader(http.StatusSeeOther)
}

// cookieValue is the status cookie's value for the token whose SHA-256 is
// sum: HMAC-SHA256 of a fixed label keyed by that digest, hex.
func cookieValue(sum *[32]byte) string {
	m := hmac.New(sha256.New, sum[:])
	m.Write([]byte(statusCookieLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// adminRequest reports whether r is for one of the operators' paths and
// the Handler serves them.
func (h *Handler) adminRequest(r *http.Request) bool {
	return h.opts.Admin != nil && IsAdminPath(r.URL.Path)
}
