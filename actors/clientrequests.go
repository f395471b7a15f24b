package actors

import (
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
	"troupe/tools"
)

// clientRequests are the requests a session sent its client (elicitation,
// ping) and awaits answers to: it numbers them, matches each response to
// its asker, and voids them when their call or the session ends. The zero
// value is empty; it is the session's alone.
type clientRequests struct {
	pending map[jsonrpc2.ID]*pendingRequest
	last    uint64 // the id of the last request sent
}

// voided is a request that was given up, for the session to tell the
// client (notifications/cancelled).
type voided struct {
	id      jsonrpc2.ID
	related *jsonrpc2.ID
}

// add numbers a new request, which reply will get the answer to.
func (r *clientRequests) add(reply chan clientReply, related *jsonrpc2.ID) jsonrpc2.ID {
	r.last++
	id := jsonrpc2.ID{Num: r.last}
	if r.pending == nil {
		r.pending = map[jsonrpc2.ID]*pendingRequest{}
	}
	r.pending[id] = &pendingRequest{reply: reply, related: related}
	return id
}

// answer hands a client's response to its asker; false when no request
// of ours has its id.
func (r *clientRequests) answer(resp *jsonrpc2.Response) bool {
	p, ok := r.pending[resp.ID]
	if !ok {
		return false
	}
	r.forget(resp.ID)
	switch {
	case resp.Error != nil:
		p.reply <- clientReply{err: &tools.ClientError{Code: resp.Error.Code, Message: resp.Error.Message}}
	case resp.Result != nil:
		p.reply <- clientReply{result: *resp.Result}
	default:
		p.reply <- clientReply{result: json.RawMessage("null")}
	}
	return true
}

// abandon forgets the request reply waits on (its asker gave up).
func (r *clientRequests) abandon(reply chan clientReply) (voided, bool) {
	for id, p := range r.pending {
		if p.reply == reply {
			r.forget(id)
			return voided{id: id, related: p.related}, true
		}
	}
	return voided{}, false
}

// fail answers every request related to call (nil: all of them) with an
// error saying why, so no asker waits for a response that will not be
// routed, and returns them.
func (r *clientRequests) fail(call *jsonrpc2.ID, why string) []voided {
	var out []voided
	for id, p := range r.pending {
		if call == nil || (p.related != nil && *p.related == *call) {
			r.forget(id)
			p.reply <- clientReply{err: &tools.ClientError{Code: protocol.CodeInvalidRequest, Message: why}}
			out = append(out, voided{id: id, related: p.related})
		}
	}
	return out
}

func (r *clientRequests) forget(id jsonrpc2.ID) {
	delete(r.pending, id)
	if len(r.pending) == 0 {
		r.pending = nil // an idle session holds no map
	}
}
