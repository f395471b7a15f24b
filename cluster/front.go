package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/cluster/wire"
)

// streamActor is the front's actor for one forwarded request: the owner
// sends the answer's parts to it, in order, and it hands them to the HTTP
// handler's goroutine. The owner never sends more than window parts ahead
// of the acknowledgements, so parts has room for every one and the actor
// never blocks.
//
// Receives: *wire.Part, from the owner's ownerRequest.
type streamActor struct {
	parts   chan *wire.Part
	pending *pending
}

// Receive implements actor.Actor.
func (s *streamActor) Receive(ctx actor.Context) {
	if p, ok := ctx.Message().(*wire.Part); ok {
		select {
		case s.parts <- p:
		default:
			// An owner that ignores the window is not one of ours to
			// trust: the request ends as if the owner were lost.
			s.pending.lose()
		}
	}
}

// pending is a forwarded request waiting for its owner: lost is closed
// when the owner's node goes away (its endpoint ended, or it left the
// membership).
type pending struct {
	member, address string
	lost            chan struct{}
	once            sync.Once
}

func (p *pending) lose() { p.once.Do(func() { close(p.lost) }) }

// forwards is the set of requests in flight to other nodes, so that a lost
// node fails them at once.
type forwards struct {
	mu  sync.Mutex
	set map[*pending]struct{}
}

func (f *forwards) add(p *pending) {
	f.mu.Lock()
	if f.set == nil {
		f.set = map[*pending]struct{}{}
	}
	f.set[p] = struct{}{}
	f.mu.Unlock()
}

func (f *forwards) remove(p *pending) {
	f.mu.Lock()
	delete(f.set, p)
	f.mu.Unlock()
}

// lose fails the requests whose owner matches.
func (f *forwards) lose(match func(*pending) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range f.set {
		if match(p) {
			p.lose()
		}
	}
}

// ErrUnknownMember is Forward's error when the member a request names is
// not (or no longer) in the cluster: the session is gone.
var ErrUnknownMember = errors.New("the node that owns the session is not in the cluster")

// Forward serves r on member, whose session it names, and writes the
// answer to w: the status and headers, then every part as it comes, flushed
// as the owner flushed it. body is r's body, already read (and bounded) by
// the caller. It returns ErrUnknownMember, having written nothing, when
// member is not in the cluster. When the owner is lost before answering,
// w gets 404; when it is lost during a stream, the stream ends with a
// JSON-RPC error event naming the session (lostSession).
func (n *Node) Forward(w http.ResponseWriter, r *http.Request, body []byte, member string) error {
	addr, ok := n.topology.Load().Address(member)
	if !ok {
		return ErrUnknownMember
	}
	p := &pending{member: member, address: addr, lost: make(chan struct{})}
	n.forwards.add(p)
	defer n.forwards.remove(p)
	// The membership may have dropped it since it was read: recheck after
	// registering, so that a later drop reaches p.
	if !n.topology.Load().Has(member) {
		return ErrUnknownMember
	}
	sa := &streamActor{parts: make(chan *wire.Part, window+1), pending: p}
	root := n.system.Root
	pid := root.Spawn(actor.PropsFromProducer(func() actor.Actor { return sa }))
	defer root.Stop(pid)
	tunnelPID := actor.NewPID(addr, tunnelName)
	root.RequestWithCustomSender(tunnelPID, forwardOf(r, body), pid)
	key := keyOf(pid)

	headWritten, written := false, uint64(0)
	rc := http.NewResponseController(w)
	for {
		select {
		case part := <-sa.parts:
			if !headWritten {
				headWritten = true
				for _, h := range part.GetHeaders() {
					w.Header()[h.GetName()] = h.GetValues()
				}
				w.WriteHeader(int(part.GetStatus()))
			}
			if len(part.GetData()) > 0 {
				if _, err := w.Write(part.GetData()); err != nil {
					root.Send(tunnelPID, &wire.Cancel{Key: key})
					return nil
				}
			}
			if part.GetEnd() {
				return nil
			}
			if rc.Flush() != nil {
				root.Send(tunnelPID, &wire.Cancel{Key: key})
				return nil
			}
			written = part.GetSeq()
			if written%ackEvery == 0 {
				root.Send(tunnelPID, &wire.Ack{Key: key, Seq: written})
			}
		case <-p.lost:
			n.log.Warn("cluster: the node owning a session was lost during a request", "member", member)
			if !headWritten {
				writeLost(w, http.StatusNotFound, lostSession(r, body))
			} else if w.Header().Get("Content-Type") == "text/event-stream" {
				_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", lostSession(r, body))
				_ = rc.Flush()
			}
			return nil
		case <-r.Context().Done():
			root.Send(tunnelPID, &wire.Cancel{Key: key})
			return nil
		}
	}
}

// forwardOf is the wire form of the front's request.
func forwardOf(r *http.Request, body []byte) *wire.Forward {
	return &wire.Forward{Method: r.Method, Target: r.URL.RequestURI(), Host: r.Host,
		Headers: headersOf(r.Header), Body: body, RemoteAddr: r.RemoteAddr}
}

// lostSession is the JSON-RPC error that ends a request whose session's
// node was lost: the client must initialize a new session. It answers the
// request's id when the body is one request.
func lostSession(r *http.Request, body []byte) []byte {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	id := json.RawMessage("null")
	if json.Unmarshal(body, &probe) == nil && len(probe.ID) > 0 {
		id = probe.ID
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if len(sid) > 8 {
		sid = sid[:8]
	}
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": -32000, "message": "session " + sid + "… was lost: the node that owned it left the cluster; initialize a new session"}})
	return msg
}

func writeLost(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// hopStats keeps the latest node-to-node round trip per member (a Hello
// and its answer, measured every few seconds), for /status.
type hopStats struct {
	mu   sync.Mutex
	last map[string]time.Duration
}

func (h *hopStats) observe(member string, d time.Duration) {
	h.mu.Lock()
	if h.last == nil {
		h.last = map[string]time.Duration{}
	}
	h.last[member] = d
	h.mu.Unlock()
}

func (h *hopStats) get(member string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.last[member]
	return d, ok
}
