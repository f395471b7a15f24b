package actors

import (
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/gate"
	"troupe/gate/approvalstate"
	"troupe/protocol"
	"troupe/tools"
)

// A round (MRTR, multi round-trip request: the stateless era's way to ask
// the client something) is one input_required result
// (protocol.InputRequiredResult) and the client's retry that answers it.
// This file holds troupe's side of both for tools/call, the approval's
// round and a tool's own: roundAsker, the stateless era's asker (asker.go).

// approvalInputKey names troupe's one input request in an input_required
// result; the client's retry answers it under the same key.
const approvalInputKey = "approval"

// Outcomes of a 2026-07-28 call that asked, or whose state was refused.
const (
	approvalAsked     = "asked"           // input_required went out; the retry decides
	approvalBadState  = "invalid_state"   // the retry's requestState or answer was refused
	approvalContinued = "continued"       // a tool's round, begun after the gate passed, goes on
	approvalTooMany   = "too_many_states" // the caller has its share of states outstanding
)

// mrtrCall is what a 2026-07-28 tools/call brings for multi round-trip
// approvals: the sealer, who is asking (the HTTP credential or the stdio
// connection), whether it declared elicitation, and on a retry the state
// and answers it sent back.
type mrtrCall struct {
	sealer    *approvalstate.Sealer
	caller    approvalstate.Caller
	caps      protocol.ClientCapabilities // what this request declared
	state     string
	responses map[string]json.RawMessage
}

// roundPayload is what a state carries besides its binding. An approval
// question's state carries nothing; a state that continues a tool's own
// round (the call was approved, or needed no approval, and the tool asked
// the client something) carries the tool's state.
type roundPayload struct {
	Tool []byte `json:"tool"`
	// Asks is set when the round put questions to the client: a retry
	// that answers none of them is then told so, and spends nothing.
	Asks bool `json:"asks,omitempty"`
}

// retry reports whether the request is the client's answer to an
// input_required result.
func (m *mrtrCall) retry() bool { return m.state != "" || m.responses != nil }

// roundAsker asks in rounds (the stateless era, which has no session to
// send a request over): a question is the call's answer, input_required
// with a sealed requestState, and the client's retry answers it. It owns
// the sealing and opening of states, the retry, and a tool's own rounds.
// It cannot ask without a sealer, nor a client whose request did not
// declare form elicitation: those calls are refused.
type roundAsker struct{ m *mrtrCall }

// newRoundAsker is the asker of a stateless-era call whose request brought
// m (its caller, capabilities, and on a retry the state and answers).
func newRoundAsker(m *mrtrCall) asker { return roundAsker{m: m} }

// rounds: a stateless-era call's questions go in rounds.
func (roundAsker) rounds() bool { return true }

// resume handles the retry that ends a round (retryRound) and reports
// whether the request was one.
func (r roundAsker) resume(inv *invocation, ctx actor.Context, spec tools.Spec, args json.RawMessage) bool {
	if r.m == nil || !r.m.retry() {
		return false
	}
	r.retryRound(inv, ctx, spec, args)
	return true
}

// ask is the gate's question in the stateless era: a round,
// input_required with the approval form and a sealed requestState
// (askFirst); the client's retry comes back through resume.
func (r roundAsker) ask(inv *invocation, ctx actor.Context, spec tools.Spec, args json.RawMessage) {
	m := r.m
	if m == nil || m.sealer == nil {
		inv.decided(approvalUnavailable, "no approval state sealer")
		inv.fail(&tools.Error{Kind: tools.KindPermissionDenied, Message: spec.Name + " was not run: it needs a person's " +
			"approval, and this server cannot ask for one over protocol 2026-07-28. Connect with initialize " +
			"(protocol 2025-11-25 or earlier) from a client that shows approval prompts."})
		return
	}
	r.askFirst(inv, spec, args)
}

// retryRound handles the retry that ends a round (a stateless-era
// tools/call with requestState or inputResponses): the state must open for
// this caller and this very call before anything else happens. A state
// that fails is refused with -32602 and nothing runs. An approval's state
// decides from the person's answer, as the handshake era's
// elicitation/create does; a tool round's state resumes the tool with the
// client's answers, the gate having passed in the round that began it.
//
// A retry that answers nothing spends nothing: its state is checked, not
// opened, and an approval is asked again under the very same state (the
// spec: ask again for what is missing), a tool round's answers are asked
// for. So a caller that repeats such retries neither uses its state up
// nor adds one (issue 23: each used to spend one and get a fresh one, and
// 4,096 of them filled the memory every caller's approvals share).
func (r roundAsker) retryRound(inv *invocation, ctx actor.Context, spec tools.Spec, args json.RawMessage) {
	m := r.m
	refuse := func(detail string) {
		inv.decided(approvalBadState, detail)
		inv.answerRPCError(protocol.NewError(protocol.CodeInvalidParams,
			"invalid params: requestState: "+detail+"; "+spec.Name+" was not run. Call it again without requestState to be asked anew.", nil),
			approvalBadState)
	}
	switch {
	case m.sealer == nil:
		refuse("this server issues no request states")
		return
	case m.state == "":
		refuse("the retry has inputResponses but no requestState")
		return
	}
	binding := approvalstate.Binding{Tool: spec.Name, Hash: inv.hash, Caller: m.caller}
	a, err := m.sealer.Check(m.state, binding)
	if err != nil {
		refuse(err.Error())
		return
	}
	open := func() bool {
		if _, err := m.sealer.Open(m.state, binding); err != nil {
			if errors.Is(err, approvalstate.ErrBusy) {
				answerBusy(inv, spec, err)
				return false
			}
			refuse(err.Error())
			return false
		}
		return true
	}
	if len(a.Payload) > 0 {
		var p roundPayload
		if err := json.Unmarshal(a.Payload, &p); err != nil {
			refuse("the state's payload is malformed")
			return
		}
		if p.Asks && len(m.responses) == 0 {
			inv.decided(approvalBadState, "the retry answers none of the tool's input requests")
			inv.answerRPCError(protocol.NewError(protocol.CodeInvalidParams,
				"invalid params: inputResponses: the retry answers none of the input requests; send the answers "+
					"with the same requestState (it is still valid). "+spec.Name+" is waiting for them.", nil), approvalBadState)
			return
		}
		if !open() {
			return
		}
		inv.req.Resume = &tools.Resume{Responses: m.responses, State: p.Tool}
		inv.decided(approvalContinued, "the client answered the tool's input_required")
		inv.run(ctx)
		return
	}
	raw, ok := m.responses[approvalInputKey]
	switch {
	case !ok && !m.caps.FormElicitation():
		noElicitation(inv, spec)
		return
	case !ok:
		askUnder(inv, spec, args, m.state, a.Offer) // the spec: ask again for what is missing
		return
	}
	if !open() {
		return
	}
	var res protocol.ElicitResult
	if err := json.Unmarshal(raw, &res); err != nil {
		refuse("the answer for " + quote(approvalInputKey) + " is not an elicitation result")
		return
	}
	res.Normalize()
	if res.Action == protocol.ElicitAccept {
		choice := choiceOnce
		if c, ok := res.Content["decision"]; ok {
			_ = json.Unmarshal(c, &choice) // decideFrom reports a non-string
		}
		if d, known := parseKnownChoice(choice); known && !a.Offer.Has(d) {
			_, err := a.Choose(choice)
			refuse(err.Error())
			return
		}
	}
	d := decideFrom(&res)
	// The state was sealed when the question went out and lives the
	// sealer's TTL, so its expiry says when it was asked.
	d.waited = time.Since(a.Expires.Add(-m.sealer.TTL()))
	if d.session && !a.Offer.Has(approvalstate.Session) {
		d.session, d.detail = false, "approved once (this caller is not offered more)"
	}
	inv.approvalDecided(ctx, d)
}

// toolAsks answers a stateless-era call whose tool needs the client's
// input (*tools.InputRequired): input_required with the tool's requests
// and a sealed state that carries the tool's own, so the retry resumes the
// tool without asking for approval again. A request for something the
// client did not declare is -32021, as for approvals. Without a sealer it
// cannot: false, and the call fails as the tool's error.
func (r roundAsker) toolAsks(inv *invocation, ir *tools.InputRequired) bool {
	m := r.m
	if m == nil || m.sealer == nil {
		return false
	}
	spec := inv.entry.Spec()
	for key, raw := range ir.Requests {
		var q struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(raw, &q) != nil {
			inv.logAt(slog.LevelError, "a tool's input request is not a request object", "key", key)
			inv.fail(&tools.Error{Kind: tools.KindInternal, Message: spec.Name + " asked a malformed question; see the server log"})
			return true
		}
		if need := needOf(q.Method, q.Params, m.caps); !need.declared {
			inv.answerRPCError(protocol.NewError(protocol.CodeMissingCapability,
				"Server requires the "+need.name+" for this request: "+spec.Name+" asks the client a question",
				map[string]any{"requiredCapabilities": need.object}), approvalUnavailable)
			return true
		}
	}
	payload, _ := json.Marshal(roundPayload{Tool: ir.State, Asks: len(ir.Requests) > 0})
	state, err := m.sealer.Seal(approvalstate.Request{
		Binding: approvalstate.Binding{Tool: spec.Name, Hash: inv.hash, Caller: m.caller},
		Offer:   approvalstate.Offer(approvalstate.Once), Payload: payload})
	if errors.Is(err, approvalstate.ErrBusy) {
		answerBusy(inv, spec, err)
		return true
	}
	if err != nil {
		inv.logAt(slog.LevelError, "sealing a tool's input state", "err", err)
		inv.fail(&tools.Error{Kind: tools.KindInternal, Message: spec.Name + " needs input that cannot be asked for; see the server log"})
		return true
	}
	answerRound(inv, protocol.NewInputRequired(ir.Requests, state))
	return true
}

// parseKnownChoice maps a form value to its Decision.
func parseKnownChoice(choice string) (approvalstate.Decision, bool) {
	for _, d := range []approvalstate.Decision{approvalstate.Once, approvalstate.Session, approvalstate.Deny} {
		if d.String() == choice {
			return d, true
		}
	}
	return 0, false
}

// askFirst answers the first request: -32021 for a client that did not
// declare elicitation, else input_required with the form and the state.
func (r roundAsker) askFirst(inv *invocation, spec tools.Spec, args json.RawMessage) {
	m := r.m
	if !m.caps.FormElicitation() {
		noElicitation(inv, spec)
		return
	}
	offer := approvalstate.OfferFor(m.caller)
	if !sessionMayTrust(spec) {
		offer = approvalstate.Offer(approvalstate.Once | approvalstate.Deny)
	}
	state, err := m.sealer.Seal(approvalstate.Request{
		Binding: approvalstate.Binding{Tool: spec.Name, Hash: inv.hash, Caller: m.caller}, Offer: offer})
	if errors.Is(err, approvalstate.ErrBusy) {
		answerBusy(inv, spec, err)
		return
	}
	if err != nil {
		inv.logAt(slog.LevelError, "sealing an approval state", "err", err)
		inv.fail(&tools.Error{Kind: tools.KindInternal, Message: "cannot ask for approval; see the server log"})
		return
	}
	askUnder(inv, spec, args, state, offer)
}

// noElicitation refuses a call that needs approval from a request that did
// not declare form elicitation: -32021 with requiredCapabilities.
func noElicitation(inv *invocation, spec tools.Spec) {
	inv.decided(approvalUnavailable, "the request did not declare the elicitation capability")
	inv.answerRPCError(protocol.NewError(protocol.CodeMissingCapability,
		"Server requires the elicitation capability for this request: "+spec.Name+" needs a person's approval",
		map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{}}}), approvalUnavailable)
}

// askUnder answers input_required with the approval form for offer under
// state: a fresh one, or the one a retry without an answer brought back.
func askUnder(inv *invocation, spec tools.Spec, args json.RawMessage, state string, offer approvalstate.Offer) {
	form := gate.Form(gate.Call{Spec: spec, Arguments: args, Preview: inv.preview, Secrets: inv.exec.secrets.Load(), Caller: callerName(inv.call.who)},
		inv.call.version, inv.hash)
	restrictForm(form, offer, spec.Name)
	question, err := protocol.ElicitInputRequest(form)
	if err != nil {
		inv.logAt(slog.LevelError, "encoding an approval form", "err", err)
		inv.fail(&tools.Error{Kind: tools.KindInternal, Message: "cannot ask for approval; see the server log"})
		return
	}
	inv.decided(approvalAsked, "input_required with the choices "+offer.String())
	answerRound(inv, protocol.NewInputRequired(map[string]json.RawMessage{approvalInputKey: question}, state))
}

// restrictForm removes the choices offer leaves out from the form's one
// decision field (and Codex's persist hint when "session" is not offered).
// Where "session" is offered (a stdio connection) it is titled for what it
// binds to here: the connection, since this revision has no session.
func restrictForm(p *protocol.ElicitRequestParams, offer approvalstate.Offer, tool string) {
	field, ok := p.RequestedSchema.Properties["decision"].(map[string]any)
	if !ok {
		return
	}
	keep := func(v string) bool { d, ok := parseKnownChoice(v); return ok && offer.Has(d) }
	connection := "Allow " + gate.Printable(tool) + " until this client disconnects"
	if one, ok := field["oneOf"].([]map[string]string); ok {
		var out []map[string]string
		for _, c := range one {
			if keep(c["const"]) {
				if c["const"] == approvalstate.Session.String() {
					c["title"] = connection
				}
				out = append(out, c)
			}
		}
		field["oneOf"] = out
	}
	if values, ok := field["enum"].([]string); ok {
		names, _ := field["enumNames"].([]string)
		var vs, ns []string
		for i, v := range values {
			if keep(v) {
				vs = append(vs, v)
				switch {
				case i >= len(names):
				case v == approvalstate.Session.String():
					ns = append(ns, connection)
				default:
					ns = append(ns, names[i])
				}
			}
		}
		field["enum"], field["enumNames"] = vs, ns
	}
	if !offer.Has(approvalstate.Session) {
		delete(p.Meta, "persist")
	}
}

// answerBusy refuses a call because a bound of outstanding approval states
// is full (an *approvalstate.BusyError): -32000 (the server is busy; try
// later) saying whose limit it is, with the bound in data. Nothing runs.
func answerBusy(inv *invocation, spec tools.Spec, err error) {
	data := map[string]any{"reason": "too many approval states outstanding"}
	var busy *approvalstate.BusyError
	if errors.As(err, &busy) {
		scope := "server"
		if busy.PerCaller {
			scope = "caller"
		}
		data = map[string]any{"reason": "too many approval states outstanding", "scope": scope,
			"limit": busy.Limit, "stateLifetimeMs": busy.TTL.Milliseconds()}
	}
	inv.decided(approvalTooMany, err.Error())
	inv.answerRPCError(protocol.NewError(protocol.CodeServerBusy, err.Error()+"; "+spec.Name+" was not run.", data), approvalTooMany)
}

// answerRound ends the call with a round's input_required result, logged
// and audited as every call is (the outcome is approvalAsked).
func answerRound(inv *invocation, ir *protocol.InputRequiredResult) {
	inv.answerWithout(&callFinished{id: inv.id, from: inv.self, input: ir}, approvalAsked)
}
