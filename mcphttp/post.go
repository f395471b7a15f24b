package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/httptransport"
	"troupe/actors/transport"
	"troupe/identity"
	"troupe/protocol"
	"troupe/protocol/framing"
)

// message is one checked JSON-RPC message of a POST body.
type message struct {
	raw  json.RawMessage
	req  *transport.Request // a request or notification, read (actors' ReadRequest)
	resp *jsonrpc2.Response // a response to a server-to-client request
}

// post handles one POST: a message or (under 2025-03-26) a batch.
func (h *Handler) post(w http.ResponseWriter, r *http.Request, who *identity.Identity) {
	if mediaType(r.Header.Get("Content-Type")) != "application/json" {
		h.refuse(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	acceptJSON, acceptSSE := accepts(r)
	if !acceptJSON && !acceptSSE {
		h.refuse(w, http.StatusNotAcceptable, "Accept must include application/json and text/event-stream")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.refuse(w, http.StatusRequestEntityTooLarge, "body exceeds the size limit")
			return
		}
		h.refuse(w, http.StatusBadRequest, "cannot read the body")
		return
	}
	body = bytes.TrimSpace(body)
	batch := len(body) > 0 && body[0] == '['
	var raws []json.RawMessage
	if batch {
		if err := json.Unmarshal(body, &raws); err != nil {
			h.rejectBody(w, framing.Check(body))
			return
		}
		if len(raws) == 0 {
			h.rejectBody(w, framing.Check([]byte(`[]`)))
			return
		}
	} else {
		raws = []json.RawMessage{body}
	}

	sessionID := r.Header.Get("Mcp-Session-Id")
	// Without a session, a lone request whose MCP-Protocol-Version header
	// names a stateless revision is of that era whatever its body says.
	hint := sessionID == "" && !batch && protocol.Version(r.Header.Get("Mcp-Protocol-Version")).IsStateless()
	msgs, rejected := h.decodeMessages(raws, who, hint)
	if !batch && len(rejected) > 0 {
		h.refused(http.StatusBadRequest)
		writeJSON(w, http.StatusBadRequest, rejected[0]) // not accepted, so 400
		return
	}

	if sessionID != "" {
		for _, m := range msgs {
			if statelessByBody(m) {
				h.refuseSessionID(w, m) // the stateless era has no sessions (stateless.go)
				return
			}
		}
	}
	if !batch && sessionID == "" && msgs[0].req != nil && msgs[0].req.Era == protocol.EraStateless {
		h.postStateless(w, r, msgs[0], acceptJSON, acceptSSE) // no session (stateless.go)
		return
	}
	// Which session: a lone initialize request without a session id makes one.
	var s *httptransport.Handle
	created := false
	if sessionID == "" && !batch && isInitialize(msgs[0]) {
		if s, created = h.newSession(w, who, msgs[0]); !created {
			return
		}
	} else {
		var ok bool
		if s, ok = h.session(w, r, who); !ok {
			return
		}
	}
	if batch && !s.Version().AllowsBatches() {
		h.refuse(w, http.StatusBadRequest, "batches are not supported by the negotiated protocol version")
		return
	}

	var streams []*httptransport.Stream
	for _, m := range msgs {
		switch {
		case m.req != nil && !m.req.Notif:
			streams = append(streams, s.Request(m.req, acceptSSE && !batch, acceptJSON))
		case m.req != nil:
			s.Notify(m.req)
		default:
			s.Respond(m.resp)
		}
	}
	switch {
	case batch && (len(streams) > 0 || len(rejected) > 0):
		h.answerBatch(w, r, s, streams, rejected)
	case len(streams) == 0:
		w.WriteHeader(http.StatusAccepted)
	default:
		h.answer(w, r, s, streams[0], acceptJSON, acceptSSE, created)
	}
}

// decodeMessages checks and decodes raw messages (framing.Decode: one pass
// each) into requests, notifications and responses, and reads each request
// (the one decode of its params, on this goroutine: Host.ReadRequest) as
// sent by who; hint says a lone request is of the
// stateless era by its header. The ones that fail the check become error
// responses of their own.
func (h *Handler) decodeMessages(raws []json.RawMessage, who *identity.Identity, hint bool) (msgs []message, rejected [][]byte) {
	owner := who.Owner()
	for _, raw := range raws {
		m, rej := framing.Decode(raw)
		if rej != nil {
			rejected = append(rejected, rej.Reply())
			continue
		}
		msg := message{raw: raw, resp: m.Response}
		if m.Request != nil {
			msg.req = h.host.ReadRequest(m.Request, hint)
			msg.req.Credential = &owner
			msg.req.Identity = who
		}
		msgs = append(msgs, msg)
	}
	return msgs, rejected
}

// JSON-RPC error (parse error or invalid request) as the body.
func (h *Handler) rejectBody(w http.ResponseWriter, rej *framing.Rejection) {
	if rej == nil {
		h.refuse(w, http.StatusBadRequest, "invalid request")
		return
	}
	h.refused(http.StatusBadRequest)
	writeJSON(w, http.StatusBadRequest, rej.Reply())
}

// isInitialize reports whether m is an initialize request (a notification
// named initialize gets no answer, so it must not make a session nobody
// learns the id of).
func isInitialize(m message) bool {
	return m.req != nil && !m.req.Notif && m.req.Method == protocol.MethodInitialize
}

// answer writes the answer to one request: application/json when the
// response comes first, or SSE when something related to the request comes
// before it (progress, log messages) and the client accepts SSE.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, s *httptransport.Handle, st *httptransport.Stream,
	acceptJSON, acceptSSE, created bool) {
	detach, err := st.Attach()
	if err != nil {
		h.refuse(w, http.StatusConflict, err.Error())
		return
	}
	defer detach()
	ctx, stop := untilSessionEnds(r.Context(), s)
	defer stop()
	events, done, err := st.Read(ctx, 0, 0)
	if err != nil {
		// The client left before anything was ready (without an event id
		// it cannot resume, so the stream need not be kept), or the
		// session ended without taking the request.
		s.Delivered(st)
		if created {
			s.Close()
		}
		select {
		case <-s.Done():
			h.refuse(w, http.StatusNotFound, "the session ended before the request was answered")
		default:
		}
		return
	}
	if len(events) == 0 && done {
		// No response will come: the request was cancelled (the client
		// asked for that) or the session ended under it.
		s.Delivered(st)
		h.unanswered(w, st)
		return
	}
	if events[0].Final && (acceptJSON || !acceptSSE) || !acceptSSE {
		final := awaitFinal(ctx, st, events, done)
		s.Delivered(st)
		if final == nil {
			h.unanswered(w, st)
			return
		}
		if created {
			if isErrorResponse(final.Data) {
				s.Close() // a failed initialize leaves no session behind
			} else {
				w.Header().Set("Mcp-Session-Id", s.ID())
			}
		}
		writeJSON(w, http.StatusOK, final.Data)
		return
	}
	if created {
		// Only SSE is acceptable: the answer still names the session.
		if isErrorResponse(events[0].Data) {
			s.Close()
		} else {
			w.Header().Set("Mcp-Session-Id", s.ID())
		}
	}
	h.streamEvents(w, ctx, s, st, 0, events, done)
}

// untilSessionEnds returns a context that ends with parent (the request's)
// or when s ends, and the function that releases it. A request that
// reached a session just as it ended went to no actor, and its stream will
// never complete; the reader must not wait for it.
func untilSessionEnds(parent context.Context, s *httptransport.Handle) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	stop := s.AfterEnd(cancel) // no goroutine per request
	return ctx, func() { stop(); cancel() }
}

// unanswered ends a POST whose request will get no response: the client
// cancelled it (204; the spec says a cancelled request gets no response) or
// the session ended under it (404: the client must initialize again). The
// stream records which.
func (h *Handler) unanswered(w http.ResponseWriter, st *httptransport.Stream) {
	if st.Cancelled() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.refuse(w, http.StatusNotFound, "the session ended before the request was answered")
}

func lastFinal(events []httptransport.Event) *httptransport.Event {
	for i := range events {
		if events[i].Final {
			return &events[i]
		}
	}
	return nil
}

func isErrorResponse(data []byte) bool {
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Error != nil
}

// answerBatch waits for every response of a batch and writes them as one
// JSON array (related notifications are not streamed for batches).
func (h *Handler) answerBatch(w http.ResponseWriter, r *http.Request, s *httptransport.Handle, streams []*httptransport.Stream, rejected [][]byte) {
	replies := rejected
	ctx, stop := untilSessionEnds(r.Context(), s)
	defer stop()
	for _, st := range streams {
		var after uint64
		for {
			events, done, err := st.Read(ctx, after, 0)
			if err != nil {
				select {
				case <-s.Done():
					h.refuse(w, http.StatusNotFound, "the session ended before the batch was answered")
				default: // the client left
				}
				return
			}
			if f := lastFinal(events); f != nil {
				replies = append(replies, f.Data)
				break
			}
			if done {
				if !st.Cancelled() {
					h.refuse(w, http.StatusNotFound, "the session ended before the batch was answered")
					return
				}
				break // cancelled: no response for this one
			}
			after = events[len(events)-1].Seq
		}
		s.Delivered(st)
	}
	if len(replies) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSON(w, http.StatusOK, append(append([]byte{'['}, bytes.Join(replies, []byte{','})...), ']'))
}

// awaitFinal reads st on from events (its first read) until the final
// event, the answer of a JSON response; nil when the stream ended without
// one or ctx did (the client left, or the session ended).
func awaitFinal(ctx context.Context, st *httptransport.Stream, events []httptransport.Event, done bool) *httptransport.Event {
	final := lastFinal(events)
	var err error
	for final == nil && !done && err == nil {
		events, done, err = st.Read(ctx, events[len(events)-1].Seq, 0)
		final = lastFinal(events)
	}
	return final
}
