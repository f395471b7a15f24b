// Package status serves the operators' views of a running troupe: the
// Prometheus metrics and a live status page, both read from an
// observe.Hub.
//
//	GET /metrics   the Hub's registry in Prometheus' exposition format (promhttp)
//	GET /status    one self-contained HTML page
//	GET /status/   the page's data: the Hub's Snapshot as JSON
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
package status

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"troupe/identity"
	"troupe/observe"
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
}

// Handler serves /metrics, /status and /status/ from a Source; any other
// path is 404.
type Handler struct {
	src     Source
	metrics http.Handler
	page    []byte
	csp     string
	log     *slog.Logger
}

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
		log: log,
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
		if who := identity.FromContext(r.Context()); who != nil && !who.Operator {
			snap = observe.TenantView(snap, who.String())
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
