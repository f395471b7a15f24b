package actors

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"
)

// httpConn is the parent of one HTTP session's session actor: the HTTP
// counterpart of connection. Where connection writes everything to one
// stdout, httpConn routes each message to a stream: a response to the
// stream of the POST that carried its request, a call's progress and log
// messages to that same stream (which makes the POST answer with SSE), and
// anything else to the standalone stream a GET opened. It owns the session's
// streams, the time it was last used and its negotiated-version mirror.
type httpConn struct {
	handle      *HTTPSession
	opts        *hostOptions
	sessionOpts *SessionOptions // the server's current options, shared
	log         *slog.Logger

	session    *actor.PID
	posts      map[jsonrpc2.ID]*postStream // open POST streams by request id
	byID       map[string]*Stream          // every stream still resumable, by stream id
	standalone *Stream
	nextStream int
	lastSeen   time.Time
	drained    bool
	stopping   bool // its streams have been ended; new requests get ended streams
}

// postStream is the stream of one POSTed request.
type postStream struct {
	stream *Stream
	sse    bool // the client accepts SSE, so related messages may go here
}

// Messages from the HTTP front (sent by HTTPSession's methods).
type (
	// httpRequest delivers a POSTed request; its answer goes to stream.
	httpRequest struct {
		req    *jsonrpc2.Request
		stream *Stream
		sse    bool
	}
	// httpNotification delivers a POSTed notification.
	httpNotification struct{ req *jsonrpc2.Request }
	// openStandalone asks for the session's GET stream (answered with
	// *standaloneReply).
	openStandalone struct{}
	// resumeStream asks for the stream a Last-Event-ID names (answered
	// with *resumeReply).
	resumeStream struct{ lastEventID string }
	// streamDelivered says a POST stream's final event reached the client,
	// so it need not be kept for resumption.
	streamDelivered struct{ id string }
	// idleCheck is the server's sweep asking whether the session has been
	// idle for long enough.
	idleCheck struct{ quiet }
)

type standaloneReply struct {
	stream *Stream
	err    error
}

type resumeReply struct {
	stream *Stream
	after  uint64
	err    error
}

// Receive implements actor.Actor.
func (c *httpConn) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.start(ctx)
	case *httpRequest:
		c.touch()
		c.request(ctx, msg)
	case *httpNotification:
		c.touch()
		ctx.Send(c.session, &Inbound{Request: msg.req})
	case *InboundResponse:
		c.touch()
		ctx.Send(c.session, msg)
	case *openStandalone:
		c.touch()
		ctx.Respond(c.openStandalone())
	case *resumeStream:
		c.touch()
		ctx.Respond(c.resume(msg.lastEventID))
	case *streamDelivered:
		delete(c.byID, msg.id)
		c.shrink()
	case *Outbound:
		c.route(msg)
	case *Unanswered:
		if p, ok := c.posts[msg.ID]; ok {
			p.stream.end(true)
			delete(c.posts, msg.ID)
			delete(c.byID, p.stream.id)
			c.shrink()
		}
	case *Negotiated:
		c.handle.version.Store(&msg.Version)
	case *Drain:
		if !c.drained {
			c.drained = true
			ctx.Send(c.session, msg)
		}
	case *registryChanged:
		ctx.Send(c.session, msg)
	case *idleCheck:
		c.checkIdle(ctx)
	case *actor.Terminated:
		if msg.Who.Equal(c.session) {
			ctx.Send(ctx.Self(), &closeOutput{})
		}
	case *closeOutput:
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		c.stopping = true
		for _, s := range c.byID {
			s.end(false)
		}
		if c.standalone != nil {
			c.standalone.end(false)
		}
	case *actor.Stopped:
		c.log.Debug("http session ended")
		c.handle.ended()
		ctx.Send(c.opts.server, &ended{id: ctx.Self().Id, http: true})
	}
}

func (c *httpConn) start(ctx actor.Context) {
	c.log = c.log.With("http_session", c.handle.id[:8])
	var err error
	produce := newSession(c.sessionOpts, c.log, c.opts.exec)
	owner, _ := c.handle.owner.([32]byte)
	c.session, err = ctx.SpawnNamed(c.opts.exec.longLivedProps(func() actor.Actor {
		s := produce().(*session)
		s.httpOwner = &owner
		return s
	}), sessionName)
	if err != nil {
		panic(err) // a fresh actor has no children: cannot happen
	}
	c.touch()
}

func (c *httpConn) touch() { c.lastSeen = time.Now() }

func (c *httpConn) request(ctx actor.Context, msg *httpRequest) {
	if c.stopping {
		msg.stream.end(false) // the session is ending: no answer will come
		return
	}
	if _, dup := c.posts[msg.req.ID]; dup {
		b, _ := json.Marshal(&jsonrpc2.Response{ID: msg.req.ID, Error: &jsonrpc2.Error{
			Code: jsonrpc2.CodeInvalidRequest, Message: "request id is already in use by a request in flight"}})
		msg.stream.append(b, true, nil)
		return
	}
	if c.posts == nil {
		c.posts = map[jsonrpc2.ID]*postStream{}
	}
	if c.byID == nil {
		c.byID = map[string]*Stream{}
	}
	c.posts[msg.req.ID] = &postStream{stream: msg.stream, sse: msg.sse}
	c.byID[msg.stream.id] = msg.stream
	c.evictEnded()
	ctx.Send(c.session, &Inbound{Request: msg.req})
}

// shrink drops the maps that became empty: a Go map keeps its buckets
// after its entries are deleted, and an idle session should hold no
// memory for the requests it answered.
func (c *httpConn) shrink() {
	if len(c.posts) == 0 {
		c.posts = nil
	}
	if len(c.byID) == 0 {
		c.byID = nil
	}
}

// maxKeptStreams bounds the streams an HTTP session keeps beyond those
// still running: answered streams whose client left before reading the
// answer stay resumable until this many pile up.
const maxKeptStreams = 64

// evictEnded forgets ended streams while more than maxKeptStreams are kept.
func (c *httpConn) evictEnded() {
	if len(c.byID) <= maxKeptStreams+len(c.posts) {
		return
	}
	for id, s := range c.byID {
		if s != c.standalone && s.isEnded() {
			delete(c.byID, id)
			if len(c.byID) <= maxKeptStreams+len(c.posts) {
				return
			}
		}
	}
}

// newStream makes a stream with the next id of this session.
func (c *httpConn) newStream(kind string) *Stream {
	c.nextStream++
	return newStream(kind+strconv.Itoa(c.nextStream), c.opts.http.StreamEvents, c.opts.http.StreamBytes)
}

// route sends one outgoing message to the stream it belongs on.
func (c *httpConn) route(out *Outbound) {
	data, err := json.Marshal(out.Message)
	if err != nil {
		c.log.Error("encoding outgoing message", "err", err)
		if out.Written != nil {
			out.Written()
		}
		return
	}
	if resp, ok := out.Message.(*jsonrpc2.Response); ok {
		if p, ok := c.posts[resp.ID]; ok {
			p.stream.append(data, true, out.Written)
			delete(c.posts, resp.ID)
			c.shrink()
			return
		}
		c.log.Debug("response for a request no stream waits for", "id", resp.ID.String())
		return
	}
	if out.Related != nil {
		if p, ok := c.posts[*out.Related]; ok && p.sse {
			p.stream.append(data, false, out.Written)
			return
		}
	}
	if c.standalone != nil {
		c.standalone.append(data, false, out.Written)
		return
	}
	c.log.Debug("no stream for an outgoing message; dropped")
	if out.Written != nil {
		out.Written()
	}
}

// openStandalone returns the session's standalone stream, made on first
// use. It outlives the GET that opened it, so a client that reconnects gets
// what was sent meanwhile; the caller attaches as its reader.
func (c *httpConn) openStandalone() *standaloneReply {
	if c.standalone != nil {
		return &standaloneReply{stream: c.standalone}
	}
	c.standalone = c.newStream("g")
	if c.byID == nil {
		c.byID = map[string]*Stream{}
	}
	c.byID[c.standalone.id] = c.standalone
	return &standaloneReply{stream: c.standalone}
}

// resume finds the stream and position a Last-Event-ID names.
func (c *httpConn) resume(lastEventID string) *resumeReply {
	id, seqText, ok := strings.Cut(lastEventID, "-")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if !ok || err != nil {
		return &resumeReply{err: ErrUnknownEvent}
	}
	s, ok := c.byID[id]
	if !ok || !s.Contains(seq) {
		return &resumeReply{err: ErrUnknownEvent}
	}
	return &resumeReply{stream: s, after: seq}
}

// checkIdle ends the session when nothing touched it for the idle timeout
// and no reader is attached to any of its streams.
func (c *httpConn) checkIdle(ctx actor.Context) {
	left := c.opts.http.IdleTimeout - time.Since(c.lastSeen)
	if left <= 0 && !c.anyReader() {
		c.log.Info("http session expired", "idle", c.opts.http.IdleTimeout)
		ctx.Stop(ctx.Self())
	}
}

func (c *httpConn) anyReader() bool {
	for _, s := range c.byID {
		if s.hasReader() {
			return true
		}
	}
	return false
}
