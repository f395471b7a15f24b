// Package status serves the operators' views of a running troupe: the
// Prometheus metrics and a live status page, both read from an
// observe.Hub.
//
//	GET /metrics   the Hub's registry in Prometheus' exposition format (promhttp)
//	GET /status    one self-contained HTML page
//	GET /status/   the page's data: the Hub's Snapshot as JSON
//	POST /status/accept  an operator's accept of a held downstream tool
//
// The page is a single document: its CSS and JavaScript are inline, its
// charts are inline SVG drawn from the history the JSON carries (the Hub
// keeps the last 5 minutes, one point per 2 s, the page's polling period,
// so a page opened now shows them at once), and it loads nothing from
// anywhere else, so it works on a machine without Internet access and its Content
// Security Policy can forbid every other source: the script and the style
// are allowed by their SHA-256 hashes, the page may only fetch its own
// origin. Server data (tool names, error texts, client names) reaches the
// document only as text nodes and attribute values, never as HTML.
//
// The Handler does no authentication: whoever mounts it decides. troupe
// mounts it behind the MCP endpoint's bearer token (package mcphttp, whose
// /status?token=… gives a browser a cookie instead) or, with
// metrics.listen, on an address of its own. When the request's context
// names an identity that is not an operator (identity.NewContext), /status/
// serves only that tenant's own view (observe.TenantView).
//
// The one thing the page changes is the pins: an operator (the request's
// context names an identity with Operator set) accepts a held downstream
// tool or prompt with POST /status/accept, naming the version the page
// showed (its hash) and carrying the accept token, a random value of this
// Handler that /status/ gives operators only. A page of another origin
// cannot read the token, so it cannot forge the POST even where a browser
// would send the cookie. Without an identity in the context (metrics.listen,
// or an HTTP front without a credential) nobody may accept.
package status

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"troupe/identity"
	"troupe/observe"
	"troupe/pins"
)

// The page's parts, assembled by New: page.html has placeholders where
// the style and the script go, so the hashes in the Content Security
// Policy are computed from exactly the bytes served.
var (
	//go:embed page.html
	pageHTML string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

// Source is what the Handler reads: *observe.Hub is one. An interface so
// the page can be tested with snapshots made up for the test.
type Source interface {
	// Snapshot is the live view the page shows.
	Snapshot() observe.Snapshot
	// Registry holds the metrics /metrics serves; it is asked at each
	// scrape.
	Registry() *prometheus.Registry
}

// Options configure a Handler.
type Options struct {
	// Logger receives errors gathering metrics; nil discards them.
	Logger *slog.Logger
	// Accept, when set, pins a held version an operator accepted on the
	// page (POST /status/accept), with the request's context. Its error
	// wraps pins.ErrChangedAgain when what is held is no longer the
	// version shown (409), pins.ErrNothingHeld when nothing of that name
	// is held (404). Nil: the page offers no Accept.
	Accept func(ctx context.Context, a Accept) error
}

// Accept is one operator's accept of a held version, as the page posts
// it.
type Accept struct {
	Server string    `json:"server"`
	Kind   pins.Kind `json:"kind"`
	Name   string    `json:"name"`
	Hash   string    `json:"hash"`
	// Token is the page's accept token (Snapshot.AcceptToken).
	Token string `json:"token"`
	// By is the operator's identity (identity.Identity.String), set by
	// the Handler from the request's context, never from the body.
	By string `json:"-"`
}

// Handler serves /metrics, /status and /status/ from a Source; any other
// path is 404.
type Handler struct {
	src     Source
	metrics http.Handler
	page    []byte
	csp     string
	log     *slog.Logger
	accept  func(context.Context, Accept) error
	// token is the accept token: random, one per Handler (process), given
	// to operators in /status/ and required by POST /status/accept.
	token string
}

// maxAcceptBytes bounds an accept's body: four short names and a token.
const maxAcceptBytes = 16 << 10

// New returns a Handler reading src.
func New(src Source, opts Options) *Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	page := strings.Replace(pageHTML, "{{STYLE}}", pageCSS, 1)
	page = strings.Replace(page, "{{SCRIPT}}", pageJS, 1)
	return &Handler{
		src: src,
		// The Source's registry is read at each scrape: a cluster node's
		// Hub replaces it with one that labels the series by node.
		metrics: promhttp.HandlerFor(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			return src.Registry().Gather()
		}), promhttp.HandlerOpts{
			ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			ErrorHandling: promhttp.ContinueOnError,
		}),
		page: []byte(page),
		csp: "default-src 'none'; script-src " + hashSource(pageJS) + "; style-src " + hashSource(pageCSS) +
			"; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		log:    log,
		accept: opts.Accept,
		token:  rand.Text(),
	}
}

// hashSource is a CSP source expression allowing exactly one inline
// script or style.
func hashSource(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/status/accept" {
		h.serveAccept(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	switch r.URL.Path {
	case "/metrics":
		h.metrics.ServeHTTP(w, r)
	case "/status":
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("Content-Security-Policy", h.csp)
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("X-Frame-Options", "DENY")
		_, _ = w.Write(h.page)
	case "/status/":
		snap := h.src.Snapshot()
		switch who := identity.FromContext(r.Context()); {
		case who != nil && !who.Operator:
			snap = observe.TenantView(snap, who.String())
		case who != nil && h.accept != nil:
			snap.AcceptToken = h.token
		}
		body, err := json.Marshal(snap)
		if err != nil {
			h.log.Error("status page: encoding the snapshot", "err", err)
			http.Error(w, "cannot encode the status", http.StatusInternalServerError)
			return
		}
		hdr.Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	default:
		http.NotFound(w, r)
	}
}

// serveAccept is POST /status/accept: an operator's accept of one held
// version, as a JSON object or a form (server, kind, name, hash, token).
// It refuses another method (405), a request whose context names no
// operator (403), a missing or wrong token (403, compared in constant
// time), a malformed body (400, 415), and answers 409 when the version
// held is no longer the one named, 404 when nothing of that name is held.
func (h *Handler) serveAccept(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: accept with POST", http.StatusMethodNotAllowed)
		return
	}
	if h.accept == nil {
		http.Error(w, "held tools cannot be accepted here", http.StatusNotFound)
		return
	}
	who := identity.FromContext(r.Context())
	if who == nil || !who.Operator {
		http.Error(w, "forbidden: only an operator's credential may accept a held tool", http.StatusForbidden)
		return
	}
	var a Accept
	r.Body = http.MaxBytesReader(w, r.Body, maxAcceptBytes)
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ctype {
	case "application/json":
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			http.Error(w, "the body is not a JSON object of server, kind, name, hash and token", http.StatusBadRequest)
			return
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			http.Error(w, "the form cannot be read", http.StatusBadRequest)
			return
		}
		f := r.PostForm
		a = Accept{Server: f.Get("server"), Kind: pins.Kind(f.Get("kind")), Name: f.Get("name"), Hash: f.Get("hash"), Token: f.Get("token")}
	default:
		http.Error(w, "send application/json or a form", http.StatusUnsupportedMediaType)
		return
	}
	if subtle.ConstantTimeCompare([]byte(a.Token), []byte(h.token)) != 1 {
		http.Error(w, "forbidden: the accept token is missing or wrong (reload the status page)", http.StatusForbidden)
		return
	}
	if a.Server == "" || a.Name == "" || a.Hash == "" || a.Kind != pins.Tool && a.Kind != pins.Prompt {
		http.Error(w, `an accept names server, name, hash and kind ("tool" or "prompt")`, http.StatusBadRequest)
		return
	}
	a.By = who.String()
	err := h.accept(r.Context(), a)
	switch {
	case errors.Is(err, pins.ErrChangedAgain):
		http.Error(w, "not accepted: "+string(a.Kind)+" "+a.Name+" of server "+a.Server+
			" changed again since the page showed it; look at the new change first", http.StatusConflict)
	case errors.Is(err, pins.ErrNothingHeld):
		http.Error(w, "not accepted: "+string(a.Kind)+" "+a.Name+" of server "+a.Server+" is not held (accepted already?)", http.StatusNotFound)
	case err != nil:
		h.log.Error("status page: accepting a held version", "server", a.Server, "kind", string(a.Kind), "name", a.Name, "err", err)
		http.Error(w, "the accept failed; the log says why", http.StatusInternalServerError)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"accepted":true}`))
	}
}
