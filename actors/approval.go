package actors

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/gate"
	"troupe/protocol"
)

// The approval outcomes, as logs and audit records name them.
const (
	approvalNotRequired = "not_required" // the tool needs no approval
	approvalTrusted     = "trusted"      // the session (or the config) trusts the tool
	approvalApproved    = "approved"     // a person approved this call
	approvalDenied      = "denied"       // a person (or the client) declined or cancelled
	approvalExpired     = "expired"      // no answer within the approval timeout
	approvalUnavailable = "unavailable"  // the client cannot ask anyone (no form elicitation)
)

// The choices an approval form offers.
const (
	choiceOnce    = "once"
	choiceSession = "session"
	choiceDeny    = "deny"
)

// approval asks the client, through elicitation/create, whether one call
// may run, and tells its invocation (its parent) the outcome: the
// handshake era's question, spawned by elicitationAsker (asker.go). It is a
// child of the invocation so that a call that is cancelled or ends takes
// its pending question with it: Stopping withdraws the request towards the
// client.
type approval struct {
	session *actor.PID
	related jsonrpc2.ID
	params  *protocol.ElicitRequestParams
	timeout time.Duration
	log     *slog.Logger

	reply   chan clientReply
	stop    chan struct{}
	timer   *time.Timer
	asked   time.Time // when the request went out: an answer within gate.MinReadTime was nobody's reading
	decided bool
}

// approvalDecided is a person's decision on a call, whichever asker got
// it: the approval actor sends it to its invocation; a round's retry
// (roundAsker) reads it from the client's answer with decideFrom.
type approvalDecided struct {
	outcome string // approvalApproved, approvalDenied, approvalExpired or approvalUnavailable
	session bool   // approved for the rest of the session (per tool)
	detail  string // how it was decided, for logs ("declined", "cancelled", "chose deny", ...)
	// ending is how a refusal came about, for the text the model reads
	// (gate.Refusal); waited is how long the client took to answer (0:
	// not known), which tells a person's answer from the client's own.
	ending gate.Ending
	waited time.Duration
}

// elicitationAnswered carries the client's answer from the waiting
// goroutine into the actor.
type elicitationAnswered struct {
	quiet
	reply clientReply
}

// approvalTimedOut fires when nobody answered within the timeout.
type approvalTimedOut struct{ quiet }

// Receive implements actor.Actor.
func (a *approval) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.ask(ctx)
	case *elicitationAnswered:
		a.answered(ctx, msg.reply)
	case *approvalTimedOut:
		a.withdraw(ctx)
		a.decide(ctx, &approvalDecided{outcome: approvalExpired, ending: gate.EndExpired, detail: "no answer within " + a.timeout.String()})
	case *actor.Stopping:
		if a.timer != nil {
			a.timer.Stop()
		}
		close(a.stop)
		if !a.decided {
			a.withdraw(ctx)
		}
	}
}

// ask sends the elicitation and starts the goroutine that waits for its
// answer; the goroutine ends with the answer or with the actor.
func (a *approval) ask(ctx actor.Context) {
	a.reply, a.stop = make(chan clientReply, 1), make(chan struct{})
	root, self := ctx.ActorSystem().Root, ctx.Self()
	ctx.Send(a.session, &clientRequest{method: protocol.MethodElicitationCreate, params: a.params,
		related: &a.related, reply: a.reply})
	a.asked = time.Now()
	reply, stop := a.reply, a.stop
	go func() {
		select {
		case r := <-reply:
			root.Send(self, &elicitationAnswered{reply: r})
		case <-stop:
		}
	}()
	a.timer = time.AfterFunc(a.timeout, func() { root.Send(self, &approvalTimedOut{}) })
}

// withdraw tells the session nobody waits for the answer any more, so the
// request is cancelled towards the client.
func (a *approval) withdraw(ctx actor.Context) {
	ctx.Send(a.session, &clientRequestAbandoned{reply: a.reply})
}

func (a *approval) answered(ctx actor.Context, r clientReply) {
	if r.err != nil {
		a.log.Info("approval request failed", "err", r.err)
		a.decide(ctx, &approvalDecided{outcome: approvalUnavailable, ending: gate.EndUnavailable, detail: "the client answered the request with an error"})
		return
	}
	var res protocol.ElicitResult
	if err := json.Unmarshal(r.result, &res); err != nil {
		a.decide(ctx, &approvalDecided{outcome: approvalDenied, ending: gate.EndUnreadable, detail: "the client's answer was not an elicitation result"})
		return
	}
	d := decideFrom(&res)
	d.waited = time.Since(a.asked)
	a.decide(ctx, d)
}

// decideFrom reads an elicitation result. An accept without a decision
// field counts as "once" (the person pressed accept on a form the client
// could not fill); Codex's _meta.persist ("session" or "always") widens an
// approval to the session: trust never outlives the session, so "always"
// means "session" here.
func decideFrom(res *protocol.ElicitResult) *approvalDecided {
	res.Normalize()
	switch res.Action {
	case protocol.ElicitAccept:
	case protocol.ElicitDecline:
		return &approvalDecided{outcome: approvalDenied, ending: gate.EndDeclined, detail: "declined"}
	case protocol.ElicitCancel:
		return &approvalDecided{outcome: approvalDenied, ending: gate.EndCancelled, detail: "cancelled"}
	default:
		if res.Action == "" && res.Decision != "" {
			return &approvalDecided{outcome: approvalDenied, ending: gate.EndUnreadable, detail: "unknown decision " + quote(res.Decision)}
		}
		return &approvalDecided{outcome: approvalDenied, ending: gate.EndUnreadable, detail: "unknown action " + quote(res.Action)}
	}
	choice := choiceOnce
	if raw, ok := res.Content["decision"]; ok {
		if err := json.Unmarshal(raw, &choice); err != nil {
			return &approvalDecided{outcome: approvalDenied, ending: gate.EndUnreadable, detail: "the decision was not a string"}
		}
	}
	var persist string
	if raw, ok := res.Meta["persist"]; ok {
		_ = json.Unmarshal(raw, &persist)
	}
	switch {
	case choice == choiceDeny:
		return &approvalDecided{outcome: approvalDenied, ending: gate.EndChoseDeny, detail: "chose deny"}
	case choice == choiceSession || persist == "session" || persist == "always":
		return &approvalDecided{outcome: approvalApproved, session: true, detail: "approved for the session"}
	case choice == choiceOnce:
		return &approvalDecided{outcome: approvalApproved, detail: "approved once"}
	}
	return &approvalDecided{outcome: approvalDenied, ending: gate.EndUnreadable, detail: "unknown decision " + quote(choice)}
}

func (a *approval) decide(ctx actor.Context, d *approvalDecided) {
	if a.decided {
		return
	}
	a.decided = true
	ctx.Send(ctx.Parent(), d)
	ctx.Stop(ctx.Self())
}
