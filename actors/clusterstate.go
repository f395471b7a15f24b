package actors

import (
	"encoding/json"

	"troupe/actors/transport"
	"troupe/protocol"
	"troupe/spool"
)

// NodeFor names the cluster member that must serve a 2026-07-28 request,
// and reports whether that is this process: a tools/call retry goes to
// the node that issued its requestState (stateIssuer), a resources/read of
// a call's output to the node that keeps it (outputKeeper); everything
// else is served wherever it arrives. It reads the params the edge decoded
// (ReadRequest), never the body again.
func (h *Host) NodeFor(req *transport.Request) (member string, local bool) {
	if req.Era != protocol.EraStateless {
		return "", true
	}
	switch req.Method {
	case protocol.MethodToolsCall:
		return h.stateIssuer(req)
	case protocol.MethodResourcesRead:
		return h.outputKeeper(req)
	}
	return "", true
}

// stateIssuer names the cluster member that can redeem the requestState a
// 2026-07-28 tools/call retry brings, and reports whether that is this
// process: only the node that sealed a state knows whether it was used, so
// the HTTP front of a cluster forwards the retry there (the sealer binds
// each state to its node, see approvalstate's "Across a cluster"). A
// parked downstream call's state is sealed the same way, by the node where
// the call waits. It reads the params the edge decoded (ReadRequest),
// never the body again, and authenticates the state before it trusts the
// node it names. A request without a state, a process outside a cluster,
// and a state that does not authenticate or names no node are local: they
// are served, or refused, here.
func (h *Host) stateIssuer(req *transport.Request) (member string, local bool) {
	sealer := h.opts.session.Approvals
	if sealer == nil || sealer.Node() == "" {
		return "", true
	}
	p, ok := req.Params.(*callToolParams)
	if !ok || len(p.RequestState) == 0 {
		return "", true
	}
	var state string
	if json.Unmarshal(p.RequestState, &state) != nil || state == "" {
		return "", true // the session answers -32602
	}
	node, err := sealer.IssuedBy(state)
	if err != nil || node == "" || node == sealer.Node() {
		return "", true
	}
	return node, false
}

// SetNode makes this Host a cluster node's: from now on the approval
// states it seals name member (only this node opens them, so each is used
// once across the cluster), and the output of its 2026-07-28 HTTP calls is
// spooled under ids that name member (spool.NodeOutputID); a retry or a
// read that reaches another node's front is sent here (NodeFor). The app
// calls it once the node has joined, before HTTP is served. Session-based
// calls need no such name: every request of a session reaches the node
// that owns it.
func (h *Host) SetNode(member string) {
	if sealer := h.opts.session.Approvals; sealer != nil {
		sealer.SetNode(member)
	}
	h.callers.node.Store(&member)
}

// outputKeeper names the cluster member that keeps the spooled output a
// 2026-07-28 resources/read asks for, and reports whether that is this
// process: a call's output stays on the node that ran it, whose id its
// links carry (spool.NodeOf), so the HTTP front of a cluster forwards the
// read there. It reads the uri the edge decoded (ReadRequest), never the
// body again. A request of another method or era, a process outside a
// cluster, and a uri that names no node or names this one are local: they
// are served, or answered "not found", here. The member named comes from
// the client: the keeper checks the read as it checks any other (only the
// caller whose call made the output reads it).
func (h *Host) outputKeeper(req *transport.Request) (member string, local bool) {
	self := h.callers.self()
	if self == "" {
		return "", true
	}
	p, ok := req.Params.(*readResourceParams)
	if !ok {
		return "", true
	}
	node, ok := spool.NodeOf(p.URI)
	if !ok || node == self {
		return "", true
	}
	return node, false
}
