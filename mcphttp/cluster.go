package mcphttp

import (
	"context"
	"errors"
	"io"
	"net/http"

	"troupe/protocol"
)

// Cluster is what the handler needs of the cluster this node belongs to
// (package cluster's Node implements it); nil serves one process.
type Cluster interface {
	// NewSessionID makes a session id that names this node as its owner.
	NewSessionID() string
	// Owner returns the member a session id names, and whether that is
	// this node.
	Owner(sessionID string) (member string, local bool)
	// Forward serves r (its body already read) on member and writes the
	// answer to w; it returns an error, having written nothing, when
	// member is not in the cluster.
	Forward(w http.ResponseWriter, r *http.Request, body []byte, member string) error
	// Ready reports whether the node has joined and can route (/readyz).
	Ready() bool
}

// forwardedKey marks the context of a request another node forwarded: it
// is served here or answered 404, never forwarded again.
type forwardedKey struct{}

// ServeForwarded serves a request another node's front forwarded to this
// one (the cluster's tunnel calls it): every check runs again, as for this
// node's own clients, and a session this node does not own is unknown.
func (h *Handler) ServeForwarded(w http.ResponseWriter, r *http.Request) {
	h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardedKey{}, true)))
}

func forwarded(r *http.Request) bool { return r.Context().Value(forwardedKey{}) != nil }

// route forwards a request whose session another node owns, and reports
// whether it did (or answered it). Requests without a session id are
// this node's: initialize makes a session here.
func (h *Handler) route(w http.ResponseWriter, r *http.Request) bool {
	c := h.opts.Cluster
	if c == nil || forwarded(r) {
		return false
	}
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return false
	}
	member, local := c.Owner(id)
	if local {
		return false
	}
	var body []byte
	if r.Method == http.MethodPost {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				h.refuse(w, http.StatusRequestEntityTooLarge, "body exceeds the size limit")
				return true
			}
			h.refuse(w, http.StatusBadRequest, "cannot read the body")
			return true
		}
	}
	if err := c.Forward(w, r, body, member); err != nil {
		h.refuse(w, http.StatusNotFound, "session not found: initialize a new one")
	}
	return true
}

// routeStateless forwards a 2026-07-28 request that only another node
// can serve, and reports whether it did (or answered it): a tools/call
// retry whose requestState another node issued (only the issuer remembers
// whether the state was used, so the retry runs once whichever front it
// reached), and a resources/read of a call's output another node keeps
// (its files are there alone). The host names the node from the params
// the edge decoded (Host.NodeFor), after authenticating a state. The body
// forwarded is the message as the client sent it, with its credential: the
// other node checks everything again, so a caller redeems and reads only
// its own. A node that has left took its states and outputs with it.
func (h *Handler) routeStateless(w http.ResponseWriter, r *http.Request, m message) bool {
	c := h.opts.Cluster
	if c == nil || forwarded(r) {
		return false
	}
	member, local := h.host.NodeFor(m.req)
	if local {
		return false
	}
	if err := c.Forward(w, r, m.raw, member); err != nil {
		msg := "resource not found: the output was kept by a troupe node that has left the cluster, and went with it; " +
			"call the tool again to see its output."
		if m.req.Method == protocol.MethodToolsCall {
			msg = "invalid params: requestState: the troupe node that issued it has left the cluster, and no other node " +
				"can redeem it; the tool was not run. Call it again without requestState to be asked anew."
		}
		h.log.Info("2026-07-28 request refused: the node that can serve it has left the cluster",
			"method", m.req.Method, "member", member)
		h.statelessError(w, http.StatusOK, m.req.ID, protocol.CodeInvalidParams, msg, nil)
	}
	return true
}

// serveReady answers /readyz: 200 once the node can take requests (at
// once for one process; for a cluster node, once it has joined and can
// route), 503 before and while it cannot (etcd away, draining).
func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	if !h.getOrHead(w, r) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if h.closing.Load() || (h.opts.Cluster != nil && !h.opts.Cluster.Ready()) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}
