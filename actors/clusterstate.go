package actors

import (
	"encoding/json"

	"troupe/actors/transport"
	"troupe/protocol"
)

// StateIssuer names the cluster member that can redeem the requestState a
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
func (h *Host) StateIssuer(req *transport.Request) (member string, local bool) {
	sealer := h.opts.session.Approvals
	if sealer == nil || sealer.Node() == "" || req.Method != protocol.MethodToolsCall || req.Era != protocol.EraStateless {
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
