package httptransport

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/transport"
	"troupe/identity"
	"troupe/protocol"
)

// Handle is the HTTP front's handle on one session actor (made by
// actors.Host.StartHTTPSession). Its methods send the session messages,
// which its Transport takes; the session's state stays in the actor.
type Handle struct {
	id      string
	who     *identity.Identity // who created the session
	owner   [32]byte           // who.Owner(), compared by the front on every request
	pid     *actor.PID
	root    *actor.RootContext
	version atomic.Uint32 // mirrors the negotiated version: its index in protocol.AllVersions, plus one
	posts   atomic.Uint64 // numbers POST streams ("p1", "p2", …)
	limits  *Limits
	onEnd   func()

	// The end of the session, for the HTTP front's waiters. Not a
	// context: a context keeps the map its AfterFunc registrations used
	// after they are stopped, a few hundred bytes on every idle session.
	endMu   sync.Mutex
	isEnded atomic.Bool
	done    chan struct{} // made by the first Done (an idle session has none); closed at the end
	waiters []endWaiter   // a slice: a session has few requests waiting at once
	waiter  uint64
}

// endWaiter is one AfterEnd registration.
type endWaiter struct {
	key uint64
	f   func()
}

// NewHandle makes the handle of a session to be started with the given
// id (made by the HTTP front, unguessable). who made it (nil: Anonymous)
// is kept for the front to compare; onEnd runs once when the session has ended, for whatever
// reason, before Done is closed; it must not call the handle's end
// methods (it runs under their lock). Bind gives it the session actor
// once it runs.
func NewHandle(id string, who *identity.Identity, onEnd func(), limits *Limits) *Handle {
	if who == nil {
		who = &identity.Identity{}
	}
	return &Handle{id: id, who: who, owner: who.Owner(), onEnd: onEnd, limits: limits}
}

// Bind ties the handle to its session actor.
func (s *Handle) Bind(root *actor.RootContext, pid *actor.PID) { s.root, s.pid = root, pid }

// ended runs onEnd and then the end's waiters, once. onEnd comes first:
// it frees the session's slot on the front, and whoever waits on Done
// (a DELETE) answers only after that, so the client's next initialize
// finds the slot free.
func (s *Handle) ended() {
	s.endMu.Lock()
	if s.isEnded.Load() {
		s.endMu.Unlock()
		return
	}
	if s.onEnd != nil {
		s.onEnd()
	}
	s.isEnded.Store(true)
	if s.done != nil {
		close(s.done)
	}
	waiters := s.waiters
	s.waiters = nil
	s.endMu.Unlock()
	for _, w := range waiters {
		go w.f()
	}
}

// AfterEnd arranges for f to run in its own goroutine when the session
// ends (at once if it has), like context.AfterFunc, and returns the
// function that cancels that; it reports whether it stopped f from
// running.
func (s *Handle) AfterEnd(f func()) (stop func() bool) {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if s.isEnded.Load() {
		go f()
		return func() bool { return false }
	}
	s.waiter++
	key := s.waiter
	s.waiters = append(s.waiters, endWaiter{key: key, f: f})
	return func() bool {
		s.endMu.Lock()
		defer s.endMu.Unlock()
		for i, w := range s.waiters {
			if w.key == key {
				last := len(s.waiters) - 1
				s.waiters[i] = s.waiters[last]
				s.waiters[last] = endWaiter{} // drop the func
				s.waiters = s.waiters[:last]
				return true
			}
		}
		return false
	}
}

// Ended reports whether the session has ended.
func (s *Handle) Ended() bool { return s.isEnded.Load() }

// ID is the session id (the Mcp-Session-Id header).
func (s *Handle) ID() string { return s.id }

// Owner is the owner key of the identity that started the session
// (identity.Identity.Owner): a request for the session must come from it.
func (s *Handle) Owner() [32]byte { return s.owner }

// Identity is who started the session.
func (s *Handle) Identity() *identity.Identity { return s.who }

// Version is the negotiated protocol version, "" before initialize.
func (s *Handle) Version() protocol.Version {
	return protocol.VersionAt(s.version.Load())
}

// Done is closed when the session has ended.
func (s *Handle) Done() <-chan struct{} {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.isEnded.Load() {
			close(s.done)
		}
	}
	return s.done
}

// setVersion mirrors the negotiated version for the HTTP front.
func (s *Handle) setVersion(v protocol.Version) {
	s.version.Store(protocol.VersionIndex(v))
}

// Limits bound the state an HTTP session may hold.
type Limits struct {
	// IdleTimeout ends a session nobody touched for this long and whose
	// streams have no reader.
	IdleTimeout time.Duration
	// StreamEvents and StreamBytes bound each stream's replay log.
	StreamEvents int
	StreamBytes  int
}

// Request delivers a request, read at the front (actors' ReadRequest);
// its response, and with sse the messages related to it, arrive on the
// returned stream. sse and json say which answers the client takes (SSE
// events, a JSON body); a batch's members take JSON alone.
func (s *Handle) Request(req *transport.Request, sse, json bool) *Stream {
	return s.request(&httpRequest{req: req, sse: sse, json: json})
}

// request gives msg a stream and sends it to the session.
func (s *Handle) request(msg *httpRequest) *Stream {
	msg.stream = newStream("p"+strconv.FormatUint(s.posts.Add(1), 10), s.limits.StreamEvents, s.limits.StreamBytes)
	if s.Ended() {
		msg.stream.end(false) // the session is gone: no actor will take the request
		return msg.stream
	}
	s.root.Send(s.pid, msg)
	return msg.stream
}

// Notify delivers a notification.
func (s *Handle) Notify(req *transport.Request) {
	s.root.Send(s.pid, &httpNotification{req: req})
}

// Respond delivers a client's response to a server-to-client request.
func (s *Handle) Respond(resp *jsonrpc2.Response) {
	s.root.Send(s.pid, &transport.InboundResponse{Response: resp})
}

// Standalone returns the session's GET stream.
func (s *Handle) Standalone() (*Stream, error) {
	res, err := s.root.RequestFuture(s.pid, &openStandalone{}, 5*time.Second).Result()
	if err != nil {
		return nil, err
	}
	r := res.(*standaloneReply)
	return r.stream, r.err
}

// Resume finds the stream a Last-Event-ID names and the sequence number to
// continue after.
func (s *Handle) Resume(lastEventID string) (*Stream, uint64, error) {
	res, err := s.root.RequestFuture(s.pid, &resumeStream{lastEventID: lastEventID}, 5*time.Second).Result()
	if err != nil {
		return nil, 0, err
	}
	r := res.(*resumeReply)
	return r.stream, r.after, r.err
}

// Delivered tells the session that st's final event reached the client
// (nothing to tell when the session forgot the stream as it answered).
func (s *Handle) Delivered(st *Stream) {
	if st.unkept.Load() {
		return
	}
	s.root.Send(s.pid, &streamDelivered{id: st.id})
}

// Close ends the session and stops everything running under it.
func (s *Handle) Close() {
	s.root.Stop(s.pid)
}
