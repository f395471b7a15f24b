package actors

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/gate"
	"troupe/protocol"
	"troupe/redact"
	"troupe/tools"
)

// scriptedAsker is a third asker, neither elicitation nor round: it
// counts what the invocation asks of it and answers as the test says. An
// invocation that works with it knows nothing of eras: the gate's one
// "needs a person" branch, a retry's resume and a tool's own question all
// go through the asker interface.
type scriptedAsker struct {
	inRounds bool
	// decision is sent to the invocation (through its invoker's mailbox,
	// as an approval child would) when asked; nil refuses at once.
	decision *approvalDecided
	// resumes makes resume take the request and answer it with a -32602.
	resumes bool
	// answersTool makes toolAsks answer a tool's question with a round.
	answersTool bool

	asked, resumed, toolAsked atomic.Int32
}

func (a *scriptedAsker) resume(inv *invocation, _ actor.Context, spec tools.Spec, _ json.RawMessage) bool {
	a.resumed.Add(1)
	if !a.resumes {
		return false
	}
	inv.answerRPCError(protocol.NewError(protocol.CodeInvalidParams, "resumed "+spec.Name, nil), approvalBadState)
	return true
}

func (a *scriptedAsker) ask(inv *invocation, ctx actor.Context, spec tools.Spec, _ json.RawMessage) {
	a.asked.Add(1)
	if a.decision == nil {
		inv.decided(approvalUnavailable, "scripted")
		inv.fail(gate.Refusal(spec, gate.Refused{Ending: gate.EndUnavailable}, inv.call.gate))
		return
	}
	ctx.Send(ctx.Self(), a.decision)
}

func (a *scriptedAsker) toolAsks(inv *invocation, ir *tools.InputRequired) bool {
	a.toolAsked.Add(1)
	if !a.answersTool {
		return false
	}
	answerRound(inv, protocol.NewInputRequired(ir.Requests, "scripted-state"))
	return true
}

func (a *scriptedAsker) rounds() bool { return a.inRounds }

// runWith runs one call of tool name from reg in an invoker whose parent
// (standing in for the session) hands back the call's one answer.
func runWith(t *testing.T, reg *tools.Registry, name string, call callContext) *callFinished {
	t.Helper()
	log := testLogger(t)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	deps := newHostDeps(&redact.Live{}, nil)
	t.Cleanup(func() {
		system.Shutdown()
		deps.running.Wait()
		deps.pool.close()
	})
	inv := &invocation{id: jsonrpc2.ID{Num: 1}, tool: name, args: json.RawMessage(`{}`), registry: reg,
		timeout: time.Minute, log: log, exec: deps, call: call}
	answers := make(chan *callFinished, 1)
	system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			ctx.Send(ctx.Spawn(deps.invokerProps), &startCall{inv: inv})
		case *callFinished:
			answers <- msg
		}
	}))
	select {
	case fin := <-answers:
		return fin
	case <-time.After(10 * time.Second):
		t.Fatal("the call was never answered")
		return nil
	}
}

// resultText is the text of a result's first block.
func resultText(fin *callFinished) string {
	if fin.result == nil || len(fin.result.Content) == 0 {
		return ""
	}
	return fin.result.Content[0].Text
}

// TestInvocationAsksOnlyThroughItsAsker runs calls with an asker that is
// neither of troupe's two: whatever the era, the gate asks a person
// through the asker's ask (once, and only for a call that needs a person),
// a decision comes back as an approvalDecided, a retry is the asker's
// resume, and a tool's own question is the asker's toolAsks.
func TestInvocationAsksOnlyThroughItsAsker(t *testing.T) {
	var runs atomic.Int32
	gated := gatedTool{name: "gated", runs: &runs}
	var sawRounds, sawSession atomic.Bool
	probe := funcTool{name: "probe", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		sawRounds.Store(req.Rounds)
		sawSession.Store(req.Session != nil)
		return textResult("probed"), nil
	}}
	question := funcTool{name: "question", call: func(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
		return nil, &tools.InputRequired{Requests: map[string]json.RawMessage{"q": json.RawMessage(`{"method":"roots/list"}`)}}
	}}
	reg, err := tools.NewRegistry(gated, probe, question)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("approved", func(t *testing.T) {
		a := &scriptedAsker{decision: &approvalDecided{outcome: approvalApproved, detail: "approved once"}}
		fin := runWith(t, reg, "gated", callContext{asker: a})
		if a.asked.Load() != 1 || runs.Load() != 1 || fin.result == nil || fin.result.IsError || resultText(fin) != "ran" {
			t.Fatalf("asked %d, runs %d, answer %+v", a.asked.Load(), runs.Load(), fin.result)
		}
	})
	t.Run("denied", func(t *testing.T) {
		runs.Store(0)
		a := &scriptedAsker{decision: &approvalDecided{outcome: approvalDenied, ending: gate.EndDeclined, detail: "declined"}}
		fin := runWith(t, reg, "gated", callContext{asker: a})
		want := gate.Refusal(gated.Spec(), gate.Refused{Ending: gate.EndDeclined, Detail: "declined"}, gate.Policy{}).Message
		if a.asked.Load() != 1 || runs.Load() != 0 || fin.result == nil || !fin.result.IsError ||
			!strings.Contains(resultText(fin), want) {
			t.Fatalf("asked %d, runs %d, answer %q, want it to hold %q", a.asked.Load(), runs.Load(), resultText(fin), want)
		}
	})
	t.Run("cannot ask", func(t *testing.T) {
		runs.Store(0)
		a := &scriptedAsker{}
		fin := runWith(t, reg, "gated", callContext{asker: a})
		if a.asked.Load() != 1 || runs.Load() != 0 || fin.result == nil || !fin.result.IsError {
			t.Fatalf("asked %d, runs %d, answer %+v", a.asked.Load(), runs.Load(), fin.result)
		}
	})
	t.Run("trusted is not asked", func(t *testing.T) {
		runs.Store(0)
		entry, _ := reg.Lookup("gated")
		fp := entry.Fingerprint()
		a := &scriptedAsker{}
		fin := runWith(t, reg, "gated", callContext{asker: a, trusted: &fp})
		if a.asked.Load() != 0 || runs.Load() != 1 || fin.result == nil || fin.result.IsError {
			t.Fatalf("asked %d, runs %d, answer %+v", a.asked.Load(), runs.Load(), fin.result)
		}
	})
	t.Run("resume comes before the gate", func(t *testing.T) {
		runs.Store(0)
		a := &scriptedAsker{resumes: true, decision: &approvalDecided{outcome: approvalApproved}}
		fin := runWith(t, reg, "gated", callContext{asker: a})
		if a.resumed.Load() != 1 || a.asked.Load() != 0 || runs.Load() != 0 || fin.refused == nil ||
			fin.refused.Message != "resumed gated" {
			t.Fatalf("resumed %d, asked %d, runs %d, answer %+v", a.resumed.Load(), a.asked.Load(), runs.Load(), fin)
		}
	})
	for _, inRounds := range []bool{false, true} {
		a := &scriptedAsker{inRounds: inRounds}
		fin := runWith(t, reg, "probe", callContext{asker: a})
		if a.asked.Load() != 0 || resultText(fin) != "probed" || sawRounds.Load() != inRounds || sawSession.Load() == inRounds {
			t.Fatalf("rounds %v: asked %d, answer %+v, the tool saw Rounds %v and a Session %v",
				inRounds, a.asked.Load(), fin.result, sawRounds.Load(), sawSession.Load())
		}
	}
	t.Run("a tool's question is the asker's", func(t *testing.T) {
		a := &scriptedAsker{answersTool: true}
		fin := runWith(t, reg, "question", callContext{asker: a})
		if a.toolAsked.Load() != 1 || fin.input == nil || fin.input.RequestState != "scripted-state" {
			t.Fatalf("toolAsks %d, answer %+v", a.toolAsked.Load(), fin)
		}
		a = &scriptedAsker{}
		fin = runWith(t, reg, "question", callContext{asker: a})
		if a.toolAsked.Load() != 1 || fin.input != nil || fin.result == nil || !fin.result.IsError {
			t.Fatalf("an asker that cannot carry the question: toolAsks %d, answer %+v", a.toolAsked.Load(), fin)
		}
	})
}
