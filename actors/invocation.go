package actors

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
	"troupe/tools"
)

// invocation is one tools/call: it finds the tool, validates the arguments,
// starts an executor, enforces the deadline and turns whatever happens into
// exactly one result for its session. It is a child of the session, and the
// supervisor of its executor.
type invocation struct {
	id       jsonrpc2.ID
	tool     string
	args     json.RawMessage
	registry *tools.Registry
	timeout  time.Duration
	log      *slog.Logger
	exec     *executorDeps

	cid      string // correlation id of this call, in every log line about it
	started  time.Time
	timer    *time.Timer
	executor *actor.PID
	done     bool
}

// executorResult is what an executor reports to its invocation.
type executorResult struct {
	result *protocol.CallToolResult
	err    error
}

// deadlineExpired fires when a call has run for its timeout.
type deadlineExpired struct{ quiet }

// Receive implements actor.Actor.
func (inv *invocation) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		inv.start(ctx)
	case *executorResult:
		inv.executorReturned(ctx, msg)
	case *deadlineExpired:
		inv.answer(ctx, (&tools.Error{Kind: tools.KindDeadlineExceeded,
			Message: inv.tool + " did not finish within " + inv.timeout.String()}).Result(inv.cid), "deadline_exceeded")
	case *actor.Stopping:
		if inv.timer != nil {
			inv.timer.Stop()
		}
		if !inv.done {
			inv.log.Info("call stopped", "duration", time.Since(inv.started))
		}
	}
}

func (inv *invocation) start(ctx actor.Context) {
	inv.cid = newCorrelationID()
	inv.started = time.Now()
	inv.log = inv.log.With("id", inv.id.String(), "tool", inv.tool, "correlation_id", inv.cid)
	entry, ok := inv.registry.Lookup(inv.tool)
	if !ok {
		inv.answer(ctx, (&tools.Error{Kind: tools.KindNotFound,
			Message: "unknown tool " + quote(inv.tool) + "; call tools/list for the available tools"}).Result(inv.cid), "unknown_tool")
		return
	}
	args, err := entry.Validate(inv.args)
	if err != nil {
		te, _ := tools.AsError(err)
		inv.answer(ctx, te.Result(inv.cid), string(te.Kind))
		return
	}
	root := ctx.ActorSystem().Root
	req := &tools.Request{Arguments: args,
		Reporter: newReporter(root, ctx.Parent(), inv.id, inv.tool),
		Client:   &peer{root: root, session: ctx.Parent(), related: inv.id}}
	inv.executor = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &executor{tool: entry.Tool, req: req, deps: inv.exec}
	}, actor.WithReceiverMiddleware(capturePanics)))
	self, root := ctx.Self(), ctx.ActorSystem().Root
	inv.timer = time.AfterFunc(inv.timeout, func() { root.Send(self, &deadlineExpired{}) })
	inv.log.Debug("call started")
}

func (inv *invocation) executorReturned(ctx actor.Context, msg *executorResult) {
	switch {
	case msg.err != nil:
		if te, ok := tools.AsError(msg.err); ok {
			inv.answer(ctx, te.Result(inv.cid), string(te.Kind))
			return
		}
		// Not meant for the client: the detail may hold host paths.
		inv.log.Error("tool failed", "err", msg.err)
		inv.answer(ctx, (&tools.Error{Kind: tools.KindInternal,
			Message: inv.tool + " failed; see the server log"}).Result(inv.cid), string(tools.KindInternal))
	case msg.result == nil:
		inv.log.Error("tool returned neither result nor error")
		inv.answer(ctx, (&tools.Error{Kind: tools.KindInternal,
			Message: inv.tool + " returned no result"}).Result(inv.cid), string(tools.KindInternal))
	default:
		inv.answer(ctx, msg.result, "ok")
	}
}

// answer sends the call's one result to the session and stops the
// invocation (and with it the executor, if still running).
func (inv *invocation) answer(ctx actor.Context, result *protocol.CallToolResult, outcome string) {
	if inv.done {
		return
	}
	inv.done = true
	if result.Content == nil {
		result.Content = []protocol.Content{}
	}
	level := slog.LevelInfo
	if result.IsError {
		level = slog.LevelWarn
	}
	inv.log.Log(context.Background(), level, "call finished", "outcome", outcome, "duration", time.Since(inv.started))
	ctx.Send(ctx.Parent(), &callFinished{id: inv.id, result: result})
	ctx.Stop(ctx.Self())
}

// HandleFailure makes the invocation the supervisor of its executor: a
// panic while running the tool becomes an internal-error result whose
// correlation id leads to the stack in the log.
func (inv *invocation) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	value, stack := panicDetails(reason)
	inv.log.Error("tool panicked", "panic", value, "stack", stack)
	sup.StopChildren(child)
	if !inv.done {
		self := sup.(actor.Context)
		inv.answer(self, (&tools.Error{Kind: tools.KindInternal,
			Message: "internal error in " + inv.tool}).Result(inv.cid), "panic")
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
