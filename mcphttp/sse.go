package mcphttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"troupe/actors/httptransport"
	"troupe/identity"
)

// get opens the session's standalone SSE stream, or resumes a stream named
// by Last-Event-ID.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, who *identity.Identity) {
	if _, sse := accepts(r); !sse || r.Header.Get("Accept") == "" {
		h.refuse(w, http.StatusNotAcceptable, "Accept must include text/event-stream")
		return
	}
	s, ok := h.session(w, r, who)
	if !ok {
		return
	}
	var st *httptransport.Stream
	var after uint64
	var err error
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		st, after, err = s.Resume(last)
		if err != nil && s.Ended() {
			h.refuse(w, http.StatusNotFound, "session not found: initialize a new one")
			return
		}
		if err != nil {
			h.refuse(w, http.StatusBadRequest, "cannot resume: "+err.Error())
			return
		}
	} else if st, err = s.Standalone(); err != nil {
		if s.Ended() {
			h.refuse(w, http.StatusNotFound, "session not found: initialize a new one")
			return
		}
		h.refuse(w, http.StatusServiceUnavailable, "cannot open the stream: "+err.Error())
		return
	}
	detach, err := st.Attach()
	if err != nil {
		h.refuse(w, http.StatusConflict, "this session's stream already has a reader (only one GET stream at a time)")
		return
	}
	defer detach()
	ctx, stop := untilSessionEnds(r.Context(), s)
	defer stop()
	events, done, err := st.Read(ctx, after, time.Millisecond)
	if err != nil && !errors.Is(err, ctx.Err()) {
		h.refuse(w, http.StatusGone, "the stream's events are no longer kept")
		return
	}
	h.streamEvents(w, ctx, s, st, after, events, done)
}

// streamEvents answers with text/event-stream: the events given (those
// after sequence number after), then every later one until the stream
// ends, the client leaves, or the client falls behind what the stream
// keeps. after matters when events is empty: a resumed stream with nothing
// new yet must continue after the client's Last-Event-ID, not replay the
// stream from its start. Idle streams get comment lines so proxies and
// clients see the connection alive.
func (h *Handler) streamEvents(w http.ResponseWriter, ctx context.Context, s *httptransport.Handle, st *httptransport.Stream,
	after uint64, events []httptransport.Event, done bool) (answered bool) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return false
	}
	for {
		for _, e := range events {
			_ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
			if _, err := fmt.Fprintf(w, "id: %s\nevent: message\ndata: %s\n\n", st.EventID(e.Seq), e.Data); err != nil {
				return false
			}
			after = e.Seq
			if e.Final {
				if rc.Flush() == nil {
					s.Delivered(st)
					return true
				}
				return false
			}
		}
		if len(events) > 0 && rc.Flush() != nil {
			return false
		}
		if done {
			return false
		}
		var err error
		events, done, err = st.Read(ctx, after, h.opts.KeepAlive)
		if err != nil {
			return false // the client left, or fell behind (it may resume from its last id)
		}
		if len(events) == 0 && !done {
			_ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return false
			}
		}
	}
}
