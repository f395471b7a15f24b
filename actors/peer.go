package actors

import (
	"context"
	"encoding/json"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/transport"
	"troupe/protocol"
	"troupe/tools"
)

// clientRequest asks the session to send a request to the client on behalf
// of the call related (nil: none). The answer goes to reply.
type clientRequest struct {
	method  string
	params  any
	related *jsonrpc2.ID
	reply   chan clientReply
}

// clientRequestAbandoned tells the session the asker stopped waiting (its
// call ended or timed out), so the request is cancelled towards the client.
type clientRequestAbandoned struct {
	quiet
	reply chan clientReply
}

type clientReply struct {
	result json.RawMessage
	err    error
}

// pendingRequest is a server-to-client request awaiting its response.
type pendingRequest struct {
	reply   chan clientReply
	related *jsonrpc2.ID
}

// sessionNotice asks the session to send a notification that no call
// owns (tools.Session.Notify): sent by a tool, also after its call ended.
type sessionNotice struct {
	method string
	params any
}

// peer implements tools.Client for one call, and tools.Session for the
// call's session, by messaging the session. One value serves both, so a
// call allocates nothing more for its Session.
type peer struct {
	root      *actor.RootContext
	session   *actor.PID
	sessionID string
	related   *jsonrpc2.ID // the call; nil for requests no call owns (Session.Client)
}

// ID implements tools.Session.
func (p *peer) ID() string { return p.sessionID }

// Notify implements tools.Session.
func (p *peer) Notify(method string, params any) {
	p.root.Send(p.session, &sessionNotice{method: method, params: params})
}

// Client implements tools.Session: requests that outlive the call, voided
// only when the session ends.
func (p *peer) Client() tools.Client {
	return &peer{root: p.root, session: p.session, sessionID: p.sessionID}
}

// Call implements tools.Client.
func (p *peer) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	reply := make(chan clientReply, 1)
	p.root.Send(p.session, &clientRequest{method: method, params: params, related: p.related, reply: reply})
	select {
	case r := <-reply:
		return r.result, r.err
	case <-ctx.Done():
		p.root.Send(p.session, &clientRequestAbandoned{reply: reply})
		return nil, ctx.Err()
	}
}

// clientNeed is what a server-to-client request needs the client to have
// declared: its name for messages, the requiredCapabilities member of a
// -32021 error, and whether the client declared it.
type clientNeed struct {
	name     string
	object   map[string]any
	declared bool
}

// needOf is the one table of what each server-to-client method needs: an
// elicitation needs its own mode (form, the default, or url), sampling and
// roots their capabilities; other methods need nothing.
func needOf(method string, params any, caps protocol.ClientCapabilities) clientNeed {
	switch method {
	case protocol.MethodElicitationCreate:
		if elicitationMode(params) == "url" {
			return clientNeed{name: "elicitation capability in url mode", declared: urlElicitation(caps),
				object: map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}}
		}
		return clientNeed{name: "elicitation capability in form mode", declared: caps.FormElicitation(),
			object: map[string]any{"elicitation": map[string]any{}}}
	case "sampling/createMessage":
		return clientNeed{name: "sampling capability", declared: caps.Sampling != nil,
			object: map[string]any{"sampling": map[string]any{}}}
	case "roots/list":
		return clientNeed{name: "roots capability", declared: caps.Roots != nil,
			object: map[string]any{"roots": map[string]any{}}}
	}
	return clientNeed{declared: true, object: map[string]any{}}
}

// elicitationMode is the mode of elicitation/create params: a form
// troupe built, or a downstream server's raw params; "" means form.
func elicitationMode(params any) string {
	switch p := params.(type) {
	case protocol.ElicitRequestParams:
		return p.Mode
	case *protocol.ElicitRequestParams:
		return p.Mode
	case json.RawMessage:
		var m struct {
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(p, &m)
		return m.Mode
	}
	return ""
}

// urlElicitation reports whether the client declared elicitation in URL
// mode (2025-11-25: {"elicitation":{"url":{}}}).
func urlElicitation(caps protocol.ClientCapabilities) bool {
	if caps.Elicitation == nil {
		return false
	}
	var modes map[string]json.RawMessage
	if err := json.Unmarshal(*caps.Elicitation, &modes); err != nil {
		return false
	}
	_, ok := modes["url"]
	return ok
}

// sendClientRequest numbers and sends a server-to-client request.
func (s *session) sendClientRequest(msg *clientRequest) {
	if s.state != Serving {
		msg.reply <- clientReply{err: &tools.ClientError{Code: protocol.CodeInvalidRequest, Message: "the session cannot send requests now"}}
		return
	}
	if need := needOf(msg.method, msg.params, s.caps); !need.declared {
		msg.reply <- clientReply{err: &tools.ClientError{Code: protocol.CodeMethodNotFound,
			Message: "the client did not declare the " + need.name}}
		return
	}
	var raw *json.RawMessage
	if msg.params != nil {
		b, err := json.Marshal(msg.params)
		if err != nil {
			msg.reply <- clientReply{err: err}
			return
		}
		r := json.RawMessage(b)
		raw = &r
	}
	id := s.requests.add(msg.reply, msg.related)
	s.out.Send(&transport.Outbound{Message: &jsonrpc2.Request{ID: id, Method: msg.method, Params: raw}, Related: msg.related})
}

// clientResponded hands a client's response to whoever waits for it.
func (s *session) clientResponded(resp *jsonrpc2.Response) {
	if !s.requests.answer(resp) {
		s.log.Debug("response to no request of ours; ignored", "id", resp.ID.String())
	}
}

// abandonClientRequest forgets a request nobody waits for and tells the
// client, as the spec asks of a sender that gives up.
func (s *session) abandonClientRequest(reply chan clientReply) {
	if v, ok := s.requests.abandon(reply); ok {
		s.cancelTowardsClient(v, "the server stopped waiting")
	}
}

// cancelTowardsClient tells the client a request of ours is void.
func (s *session) cancelTowardsClient(v voided, why string) {
	s.notify(protocol.NotificationCancelled, map[string]any{"requestId": v.id.Num, "reason": why}, v.related)
}

// failClientRequests answers every pending request related to call (nil:
// all of them, as the session ends) with an error, so no asker waits for a
// response that will not be routed. For a call that ended, the client is
// told its requests are void; whichever of this and the asker's own
// abandonment comes first does it, once.
func (s *session) failClientRequests(call *jsonrpc2.ID, why string) {
	for _, v := range s.requests.fail(call, why) {
		if call != nil {
			s.cancelTowardsClient(v, why)
		}
	}
}
