package mcphttp

import (
	"encoding/json"
	"net/http"
	"strings"

	"troupe/auth"
)

// resourceMetadataRequest reports whether r asks for RFC 9728's protected
// resource metadata: at the well-known path, alone or followed by the MCP
// endpoint's path (or the public URL's, behind a proxy that rewrites it).
func (h *Handler) resourceMetadataRequest(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, auth.MetadataPath)
	if !ok {
		return false
	}
	if rest == "" || rest == h.opts.Path {
		return true
	}
	if d, ok := h.auth.Load().Resource(); ok && d.MetadataURL() != "" {
		return strings.HasSuffix(d.MetadataURL(), auth.MetadataPath+rest)
	}
	return false
}

// serveResourceMetadata answers the protected resource metadata: the
// audience as resource, the issuer, the scopes. Without OAuth there is
// none (404). It is public (a client reads it before it has a token),
// so it passes no credential check, and any origin may read it.
func (h *Handler) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	if !h.getOrHead(w, r) {
		return
	}
	d, ok := h.auth.Load().Resource()
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, err := json.Marshal(d.ProtectedResource())
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(append(body, '\n'))
}

// resourceMetadataURL is the metadata URL a challenge names: the
// configured one, else the one the OAuth validator names (from
// http.public_url), else the one on the origin the request came to.
// Without OAuth there is no metadata to name.
func (h *Handler) resourceMetadataURL(r *http.Request) string {
	if h.opts.ResourceMetadata != "" {
		return h.opts.ResourceMetadata
	}
	d, ok := h.auth.Load().Resource()
	if !ok {
		return ""
	}
	if u := d.MetadataURL(); u != "" {
		return u
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if r.Host == "" || strings.ContainsAny(r.Host, "\"\\ ") {
		return "" // nothing safe to quote into the header
	}
	return scheme + "://" + r.Host + auth.MetadataPath + h.opts.Path
}
