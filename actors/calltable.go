package actors

import (
	"encoding/json"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
)

// inflight is one tools/call the session is running.
type inflight struct {
	pid       *actor.PID // the invoker running it
	tool      string
	token     json.RawMessage // progress token, nil when none
	cancelled bool
	answered  bool
	method    bool    // a method of SessionOptions.Methods: answered by methodAnswer
	progress  float64 // last progress value sent; values must grow
	reported  bool    // progress has been sent at least once
	// version and era are the call's request's: a stateless-era call
	// speaks its own version, not the session's; level is a stateless-era
	// call's own log threshold (nil: it gets no log messages).
	version protocol.Version
	era     protocol.Era
	level   *protocol.LoggingLevel
	// inv is the call, for the session to record it when it is cancelled
	// before its invoker took it (invocation.claimed).
	inv *invocation
}

// callTable is a session's calls in flight, by request id, with the
// invokers that run them and the idle invokers kept for the next calls.
// Its maps are made on first use (a session that never calls holds none)
// and then kept: dropping them when they empty would make them anew for
// every call of a session that calls one at a time. The zero value is an
// empty table. It is the session's alone: no locking.
//
// An answered or cancelled call may stay in the table until its invoker
// has stopped (childEnded), so the client may reuse the id meanwhile: a
// new call under the same id replaces it, and the old invoker's end then
// leaves the new entry alone.
type callTable struct {
	calls map[jsonrpc2.ID]*inflight
	byPID map[string]jsonrpc2.ID // invoker PID id → the id of the call it runs
	idle  []*actor.PID
}

// get is the call under id.
func (t *callTable) get(id jsonrpc2.ID) (*inflight, bool) {
	c, ok := t.calls[id]
	return c, ok
}

// busy reports whether id names a call that is still running (not
// answered, not cancelled): a new request may not reuse it.
func (t *callTable) busy(id jsonrpc2.ID) bool {
	c, ok := t.calls[id]
	return ok && !c.answered && !c.cancelled
}

// len is how many calls the table holds.
func (t *callTable) len() int { return len(t.calls) }

// add files call under id, run by call.pid.
func (t *callTable) add(id jsonrpc2.ID, call *inflight) {
	if t.calls == nil {
		t.calls, t.byPID = map[jsonrpc2.ID]*inflight{}, map[string]jsonrpc2.ID{}
	}
	t.calls[id] = call
	t.byPID[call.pid.Id] = id
}

// runBy is the call invoker pid runs, and its id.
func (t *callTable) runBy(pid *actor.PID) (jsonrpc2.ID, *inflight, bool) {
	id, ok := t.byPID[pid.Id]
	if !ok {
		return jsonrpc2.ID{}, nil, false
	}
	c := t.calls[id]
	if c == nil || !c.pid.Equal(pid) {
		return id, nil, false // its id was reused by a newer call
	}
	return id, c, true
}

// remove forgets call id and its invoker pid.
func (t *callTable) remove(id jsonrpc2.ID, pid *actor.PID) {
	delete(t.byPID, pid.Id)
	if c, ok := t.calls[id]; ok && c.pid.Equal(pid) {
		delete(t.calls, id)
	}
}

// invokerGone forgets a stopped invoker: from the idle ones, and the call
// it ran (returned, when the table still held it).
func (t *callTable) invokerGone(pid *actor.PID) (jsonrpc2.ID, *inflight, bool) {
	for i, p := range t.idle {
		if p.Equal(pid) {
			t.idle = append(t.idle[:i], t.idle[i+1:]...)
			break
		}
	}
	id, call, ok := t.runBy(pid)
	delete(t.byPID, pid.Id)
	if ok {
		delete(t.calls, id)
	}
	return id, call, ok
}

// takeIdle is an idle invoker for the next call, nil when none is kept.
func (t *callTable) takeIdle() *actor.PID {
	n := len(t.idle)
	if n == 0 {
		return nil
	}
	pid := t.idle[n-1]
	t.idle[n-1] = nil
	t.idle = t.idle[:n-1]
	return pid
}

// keepIdle keeps pid for a next call; false when maxIdleInvokers are kept
// already (the caller stops it).
func (t *callTable) keepIdle(pid *actor.PID) bool {
	if len(t.idle) >= maxIdleInvokers {
		return false
	}
	t.idle = append(t.idle, pid)
	return true
}

// all calls fn for every call in the table.
func (t *callTable) all(fn func(id jsonrpc2.ID, c *inflight)) {
	for id, c := range t.calls {
		fn(id, c)
	}
}
