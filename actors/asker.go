package actors

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/gate"
	"troupe/tools"
)

// asker puts a call's questions to a person, in the way the call's era
// allows: over the session (elicitationAsker: the handshake era's
// server→client elicitation/create) or in a round (roundAsker: the
// stateless era's input_required result and the client's retry, mrtr.go).
// The gate and the invocation do not know which: the invocation asks "may
// this call run?" and gets back, in the end, an approvalDecided, unless the
// asker answered the call itself (a refusal because it cannot ask, or the
// round's input_required).
type asker interface {
	// resume handles a request that answers a question asked earlier (a
	// round's retry), before the gate: it decides the call, resumes its
	// tool or refuses it, and reports true. A request that answers
	// nothing is not its business: false, and the gate runs.
	resume(inv *invocation, ctx actor.Context, spec tools.Spec, args json.RawMessage) bool
	// ask puts the gate's question about this call to a person. The
	// invocation learns the decision from an approvalDecided (its
	// approvalDecided method, called now or later), or the asker
	// answered the call itself.
	ask(inv *invocation, ctx actor.Context, spec tools.Spec, args json.RawMessage)
	// toolAsks answers a call whose tool asked the client something by
	// returning *tools.InputRequired, and reports whether it did; false
	// leaves the error to be answered as any tool's failure.
	toolAsks(inv *invocation, ir *tools.InputRequired) bool
	// rounds reports whether questions go in rounds: the call has no
	// session to send requests over later, so its tool asks by returning
	// *tools.InputRequired (tools.Request.Rounds) and gets no
	// tools.Session.
	rounds() bool
}

// elicitationAsker asks over the session (the handshake era): an approval
// child sends elicitation/create to the client and reports its
// approvalDecided. Its value is whether the client can show an approval
// form; without one nobody can be asked, and a call that needs a person
// is refused. (A bool, not a struct: a bool in an interface costs no
// allocation, and every handshake-era call makes one.)
type elicitationAsker bool

// newElicitationAsker is the asker of a call in a session whose client
// can (form) or cannot show approval forms.
func newElicitationAsker(form bool) asker { return elicitationAsker(form) }

// resume: a session's answers come as responses to its requests, never as
// a retry of the call.
func (elicitationAsker) resume(*invocation, actor.Context, tools.Spec, json.RawMessage) bool {
	return false
}

// ask spawns the approval child that puts the question to the client, or
// refuses the call when the client cannot show forms.
func (canShow elicitationAsker) ask(inv *invocation, ctx actor.Context, spec tools.Spec, args json.RawMessage) {
	if !canShow {
		inv.decided(approvalUnavailable, "the client cannot show approval forms")
		inv.fail(gate.Refusal(spec, gate.Refused{Ending: gate.EndUnavailable}, inv.call.gate))
		return
	}
	form := gate.Form(gate.Call{Spec: spec, Arguments: args, Preview: inv.preview, Secrets: inv.exec.secrets.Load(), Session: inv.call.overrides,
		Caller: callerName(inv.call.who)},
		inv.call.version, inv.hash)
	a := &approval{session: ctx.Parent(), related: inv.id, params: form,
		timeout: inv.call.gate.TimeoutOrDefault(), log: inv.logger()}
	ctx.Spawn(inv.exec.props(func() actor.Actor { return a }))
	inv.logAt(slog.LevelInfo, "approval requested", "args_hash", inv.hash)
	inv.asked = time.Now()
	if o := inv.exec.observer; o != nil {
		o.CallStateChanged(inv.view, CallWaitingApproval)
	}
}

// toolAsks: a tool in a session asks its questions during the call,
// through tools.Request.Client; an InputRequired is its failure.
func (elicitationAsker) toolAsks(*invocation, *tools.InputRequired) bool { return false }

// rounds: a session's call asks during the call.
func (elicitationAsker) rounds() bool { return false }
