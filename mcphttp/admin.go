package mcphttp

import (
	"crypto/sha256"
	"net/http"
	"time"

	"troupe/auth"
	"troupe/identity"
)

// The operators' paths served beside MCP when Options.Admin is set: the
// Prometheus metrics, the status page and the page's JSON. They sit behind
// the MCP endpoint's own checks (Host, Origin, bearer token), so exposing
// them needs no second secret. Operators (identity.Operator: [auth]
// operators, or every token when it names none) see everything; another
// identity, a tenant, gets the status page and its JSON with only its own
// sessions, calls and audit entries (the Admin handler filters them by
// the identity the request's context carries), and 403 on /metrics, whose
// series are server-wide.
const (
	adminMetrics    = "/metrics"
	adminStatus     = "/status"
	adminStatusJSON = "/status/"
	// adminAccept is the page's Accept of a held downstream tool: a POST,
	// for operators only (package status checks its accept token).
	adminAccept = "/status/accept"
)

// IsAdminPath reports whether path is one of the operators' paths the
// Handler serves with Options.Admin (/metrics, /status, /status/,
// /status/accept): the MCP endpoint must not be one of them.
func IsAdminPath(path string) bool {
	return path == adminMetrics || path == adminStatus || path == adminStatusJSON || path == adminAccept
}

// statusCookie is the cookie a browser gets for the status page in
// exchange for a token in /status?token=…. A browser sends no bearer
// header, so the cookie stands in for it. Its value is random, one per
// login, and kept by the server with an expiry (statusLogins): it says
// nothing about the token, a stolen one dies with its login, and changing
// the token (SetBearerToken on a reload) ends every login of the old one.
const statusCookie = "troupe_status"

// serveAdmin serves Options.Admin's paths: loopback Host and allowed
// Origin as on the MCP endpoint, GET or HEAD only (POST only on
// /status/accept, which also needs an operator, and, when the status
// cookie stands for the credential, an Origin header: a browser's POST
// always has one), then the bearer token
// (in the Authorization header, or, on the status page's paths, as the
// status cookie), whose identity must be an operator on /metrics (else
// 403) and is passed to Admin in the request's context
// (identity.NewContext), so a tenant's page shows its own view. A GET of
// /status?token=<token> with a valid token sets
// the cookie and redirects to /status without the query, so the token
// leaves the address bar and the history. Every refusal goes through deny
// (logged, counted).
func (h *Handler) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if !h.checkSource(w, r) {
		return
	}
	accept := r.URL.Path == adminAccept
	switch {
	case accept && r.Method != http.MethodPost:
		w.Header().Set("Allow", "POST")
		h.refuse(w, http.StatusMethodNotAllowed, "method not allowed: accept with POST")
		return
	case !accept && r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		h.refuse(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	chain := h.auth.Load()
	if !chain.Required() {
		if accept {
			// Nobody is known here, so nobody is an operator.
			h.deny(w, r, http.StatusForbidden, "forbidden: accepting a held tool on the status page needs an operator's "+
				"credential ([auth]); without one, use troupe tools --accept")
			return
		}
		h.opts.Admin.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == adminStatus && r.URL.Query().Has("token") {
		h.exchangeToken(w, r, chain.Tokens)
		return
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		// A bearer header decides alone: a wrong one is refused even
		// beside a good cookie, as on the MCP endpoint.
		if who, ok := h.authenticate(w, r); ok && h.mayUse(w, r, who) {
			h.serveAdminAs(w, r, who)
		}
		return
	}
	// The cookie is the status page's (its Path is /status): /metrics is
	// for scrapers, which send the bearer header.
	if c, err := r.Cookie(statusCookie); err == nil && r.URL.Path != adminMetrics {
		if accept && r.Header.Get("Origin") == "" {
			h.deny(w, r, http.StatusForbidden, "forbidden: an accept sent with the status cookie must carry an Origin header")
			return
		}
		found, sum, key := h.logins.check(c.Value)
		who, still := chain.Tokens.LookupSum(sum)
		if found == loginValid && (!still || who.Key() != key) {
			found = loginUnknown // its token was removed, changed or renamed
		}
		switch found {
		case loginValid:
			if h.mayUse(w, r, who) {
				h.serveAdminAs(w, r, who)
			}
		case loginExpired:
			h.deny(w, r, http.StatusUnauthorized, "the status page's login has expired: open /status?token=<token> again")
		default:
			h.deny(w, r, http.StatusUnauthorized, "the status cookie is not valid (expired, or the token changed?): "+
				"open /status?token=<token> again")
		}
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="troupe"`)
	h.deny(w, r, http.StatusUnauthorized, "authentication required: send Authorization: Bearer <token>, "+
		"or open /status?token=<token> in a browser")
}

// exchangeToken checks the token of /status?token=… in constant time and,
// when it fits, makes a login, sets its cookie (Path=/status, Max-Age of
// the login's lifetime, HttpOnly, SameSite=Strict, Secure over TLS) and
// redirects (303) to /status.
func (h *Handler) exchangeToken(w http.ResponseWriter, r *http.Request, tokens *auth.Tokens) {
	got := sha256.Sum256([]byte(r.URL.Query().Get("token")))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	who, ok := tokens.LookupSum(got)
	if !ok {
		h.deny(w, r, http.StatusUnauthorized, "invalid token in /status?token=")
		return
	}
	value, err := h.logins.add(&got, who.Key())
	if err != nil {
		h.log.Error("status page login: no random value for the cookie", "err", err)
		h.refuse(w, http.StatusInternalServerError, "the login could not be made; try again")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     statusCookie,
		Value:    value,
		Path:     adminStatus,
		MaxAge:   int(statusLoginTTL / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Location", adminStatus)
	w.WriteHeader(http.StatusSeeOther)
}

// mayUse lets who use r's path, or answers 403: /metrics is for
// operators only (with [auth] operators set, only the tokens and scopes it
// names are operators: app sets identity.Operator), since its series are
// server-wide, and so is /status/accept, which changes what troupe
// trusts; the status page and its JSON are for every identity, a tenant
// seeing only its own (serveAdminAs).
func (h *Handler) mayUse(w http.ResponseWriter, r *http.Request, who *identity.Identity) bool {
	if who.Operator || r.URL.Path != adminMetrics && r.URL.Path != adminAccept {
		return true
	}
	h.deny(w, r, http.StatusForbidden, "forbidden: "+who.String()+" is not an operator ([auth] operators names who may use "+r.URL.Path+")")
	return false
}

// serveAdminAs serves r from Options.Admin with who in its context: the
// status handler shows a tenant only its own view.
func (h *Handler) serveAdminAs(w http.ResponseWriter, r *http.Request, who *identity.Identity) {
	h.opts.Admin.ServeHTTP(w, r.WithContext(identity.NewContext(r.Context(), who)))
}

// adminRequest reports whether r is for one of the operators' paths and
// the Handler serves them.
func (h *Handler) adminRequest(r *http.Request) bool {
	return h.opts.Admin != nil && IsAdminPath(r.URL.Path)
}
