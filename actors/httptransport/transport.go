// Package httptransport is the streamable HTTP transport of troupe's
// sessions: the HTTP front (package mcphttp) holds a Handle per session and
// reads the session's Streams; the session actor owns a Transport, which
// files each POST's stream under its request id and routes what the
// session sends to the right stream. See Transport.
package httptransport

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/transport"
	"troupe/identity"
	"troupe/protocol"
	"troupe/protocol/framing"
)

// Transport is the transport of one HTTP session. Where stdio writes
// everything to one stdout, it routes each message to a stream: a response
// to the stream of the POST that carried its request, a call's progress
// and log messages to that same stream (which makes the POST answer with
// SSE), and anything else to the standalone stream a GET opened. It owns
// the session's streams, the time it was last used and its
// negotiated-version mirror; the HTTP front reads the streams.
type Transport struct {
	handle *Handle
	log    *slog.Logger

	posts      map[jsonrpc2.ID]*postStream // open POST streams by request id
	byID       map[string]*Stream          // every stream still resumable, by stream id
	standalone *Stream
	nextStream int
	lastSeen   time.Time
	closed     bool // its streams have been ended; new requests get ended streams
}

// Identity is who started the session (its Handle's).
func (t *Transport) Identity() *identity.Identity { return t.handle.who }

// postStream is the stream of one POSTed request.
type postStream struct {
	stream *Stream
	sse    bool // the client accepts SSE, so related messages may go here
	json   bool // the client accepts a JSON answer
}

// Messages from the HTTP front (sent by Handle's methods).
type (
	// httpRequest delivers a POSTed request; its answer goes to stream.
	httpRequest struct {
		req       *transport.Request
		stream    *Stream
		sse, json bool
	}
	// httpNotification delivers a POSTed notification.
	httpNotification struct{ req *transport.Request }
	// openStandalone asks for the session's GET stream (answered with
	// *standaloneReply).
	openStandalone struct{}
	// resumeStream asks for the stream a Last-Event-ID names (answered
	// with *resumeReply).
	resumeStream struct{ lastEventID string }
	// streamDelivered says a POST stream's final event reached the client,
	// so it need not be kept for resumption.
	streamDelivered struct{ id string }
)

// Request is the request an httpRequest carries: the session answers it
// with an internal error if handling it panicked.
func (m *httpRequest) Request() *transport.Request { return m.req }

type standaloneReply struct {
	stream *Stream
	err    error
}

type resumeReply struct {
	stream *Stream
	after  uint64
	err    error
}

// New makes the transport of the session handle stands for.
func New(handle *Handle, log *slog.Logger) *Transport { return &Transport{handle: handle, log: log} }

// Start implements transport.Transport.
func (o *Transport) Start(actor.Context, transport.Session) { o.Touch() }

// Touch implements transport.Transport: the session was used now.
func (o *Transport) Touch() { o.lastSeen = time.Now() }

// Receive implements transport.Transport: the front's messages (sent by
// Handle's methods), and the server's idle check.
func (o *Transport) Receive(ctx actor.Context, s transport.Session, msg any) bool {
	switch msg := msg.(type) {
	case *httpRequest:
		o.Touch()
		if o.request(msg) {
			s.Handle(ctx, msg.req)
		}
	case *httpNotification:
		o.Touch()
		s.Handle(ctx, msg.req)
	case *openStandalone:
		o.Touch()
		ctx.Respond(o.openStandalone())
	case *resumeStream:
		o.Touch()
		ctx.Respond(o.resume(msg.lastEventID))
	case *streamDelivered:
		delete(o.byID, msg.id)
		o.shrink()
	case *transport.IdleCheck:
		o.checkIdle(ctx)
	default:
		return false
	}
	return true
}

// request files a POST's stream under its request id; false when the
// request is not to be handled (the session is ending, or the id is taken).
func (o *Transport) request(msg *httpRequest) bool {
	if o.closed {
		msg.stream.end(false) // the session is ending: no answer will come
		return false
	}
	if _, dup := o.posts[msg.req.ID]; dup {
		e := &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: "request id is already in use by a request in flight"}
		b, _ := json.Marshal(&jsonrpc2.Response{ID: msg.req.ID, Error: e})
		msg.stream.answer(b, e, nil)
		return false
	}
	if o.posts == nil {
		o.posts = map[jsonrpc2.ID]*postStream{}
	}
	if o.byID == nil {
		o.byID = map[string]*Stream{}
	}
	o.posts[msg.req.ID] = &postStream{stream: msg.stream, sse: msg.sse, json: msg.json}
	o.byID[msg.stream.id] = msg.stream
	o.evictEnded()
	return true
}

// Unanswered implements transport.Transport: the request's stream ends
// without an answer (the client cancelled it).
func (o *Transport) Unanswered(id jsonrpc2.ID) {
	if p, ok := o.posts[id]; ok {
		p.stream.end(true)
		delete(o.posts, id)
		delete(o.byID, p.stream.id)
		o.shrink()
	}
}

// Negotiated implements transport.Transport: the front checks requests'
// MCP-Protocol-Version against it.
func (o *Transport) Negotiated(v protocol.Version) { o.handle.setVersion(v) }

// Stopping implements transport.Transport: every stream ends, so open SSE
// responses finish.
func (o *Transport) Stopping() {
	o.closed = true
	for _, s := range o.byID {
		s.end(false)
	}
	if o.standalone != nil {
		o.standalone.end(false)
	}
}

// Stopped implements transport.Transport: the front's waiters hear of the
// end.
func (o *Transport) Stopped() {
	o.log.Debug("http session ended")
	o.handle.ended()
}

// shrink drops the maps that became empty: a Go map keeps its buckets
// after its entries are deleted, and an idle session should hold no
// memory for the requests it answered.
func (o *Transport) shrink() {
	if len(o.posts) == 0 {
		o.posts = nil
	}
	if len(o.byID) == 0 {
		o.byID = nil
	}
}

// maxKeptStreams bounds the streams an HTTP session keeps beyond those
// still running: answered streams whose client left before reading the
// answer stay resumable until this many pile up.
const maxKeptStreams = 64

// evictEnded forgets ended streams while more than maxKeptStreams are kept.
func (o *Transport) evictEnded() {
	if len(o.byID) <= maxKeptStreams+len(o.posts) {
		return
	}
	for id, s := range o.byID {
		if s != o.standalone && s.isEnded() {
			delete(o.byID, id)
			if len(o.byID) <= maxKeptStreams+len(o.posts) {
				return
			}
		}
	}
}

// newStream makes a stream with the next id of this session.
func (o *Transport) newStream(kind string) *Stream {
	o.nextStream++
	return newStream(kind+strconv.Itoa(o.nextStream), o.handle.limits.StreamEvents, o.handle.limits.StreamBytes)
}

// Send implements transport.Transport: it puts one outgoing message on the
// stream it belongs on.
func (o *Transport) Send(out *transport.Outbound) {
	data, err := framing.Encode(out.Message)
	if err != nil {
		o.log.Error("encoding outgoing message", "err", err)
		if out.Written != nil {
			out.Written()
		}
		return
	}
	if resp, ok := out.Message.(*jsonrpc2.Response); ok {
		if p, ok := o.posts[resp.ID]; ok {
			first := p.stream.answer(data, resp.Error, out.Written)
			delete(o.posts, resp.ID)
			if !p.sse || first && p.json {
				// The front answers with JSON (it does when the answer is the
				// stream's first event and the client takes JSON, and always
				// when it takes no SSE): no event id reaches the client, so
				// nothing can resume the stream. Forget it now rather than
				// when the front says it was delivered, one message less
				// per request.
				delete(o.byID, p.stream.id)
				p.stream.unkept.Store(true)
			}
			o.shrink()
			return
		}
		o.log.Debug("response for a request no stream waits for", "id", resp.ID.String())
		return
	}
	if out.Related != nil {
		if p, ok := o.posts[*out.Related]; ok && p.sse {
			p.stream.append(data, false, out.Written)
			return
		}
	}
	if o.standalone != nil {
		o.standalone.append(data, false, out.Written)
		return
	}
	o.log.Debug("no stream for an outgoing message; dropped")
	if out.Written != nil {
		out.Written()
	}
}

// openStandalone returns the session's standalone stream, made on first
// use. It outlives the GET that opened it, so a client that reconnects gets
// what was sent meanwhile; the caller attaches as its reader.
func (o *Transport) openStandalone() *standaloneReply {
	if o.standalone != nil {
		return &standaloneReply{stream: o.standalone}
	}
	o.standalone = o.newStream("g")
	if o.byID == nil {
		o.byID = map[string]*Stream{}
	}
	o.byID[o.standalone.id] = o.standalone
	return &standaloneReply{stream: o.standalone}
}

// resume finds the stream and position a Last-Event-ID names.
func (o *Transport) resume(lastEventID string) *resumeReply {
	id, seqText, ok := strings.Cut(lastEventID, "-")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if !ok || err != nil {
		return &resumeReply{err: ErrUnknownEvent}
	}
	s, ok := o.byID[id]
	if !ok || !s.Contains(seq) {
		return &resumeReply{err: ErrUnknownEvent}
	}
	return &resumeReply{stream: s, after: seq}
}

// checkIdle ends the session when nothing touched it for the idle timeout
// and no reader is attached to any of its streams.
func (o *Transport) checkIdle(ctx actor.Context) {
	left := o.handle.limits.IdleTimeout - time.Since(o.lastSeen)
	if left <= 0 && !o.anyReader() {
		o.log.Info("http session expired", "idle", o.handle.limits.IdleTimeout)
		ctx.Stop(ctx.Self())
	}
}

func (o *Transport) anyReader() bool {
	for _, s := range o.byID {
		if s.hasReader() {
			return true
		}
	}
	return false
}
