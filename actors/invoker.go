package actors

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/tools"
)

// invoker is the actor that runs a session's tool calls, one at a time: a
// session keeps the invokers of finished calls (up to maxIdleInvokers) and
// hands each new call to one of them with startCall, so a call that needs
// no approval costs no actor spawn and no stop, only the messages of the
// call itself. It is a child of its session, and the supervisor of the
// call's approval child.
//
// Cancellation and deadlines are still stops: the session stops the
// invoker of a cancelled call, or of a call whose tool is still unwinding
// after its deadline answer; Stopping cancels the tool's context, which
// kills its programs. Such an invoker is never reused.
type invoker struct {
	cur *invocation // the call being run, or the last one
	gen uint64      // calls run so far: each call's messages carry its number
}

// startCall hands an invoker its next call. Sent by the session.
type startCall struct{ inv *invocation }

// maxIdleInvokers bounds the invokers a session keeps for its next calls:
// a client's usual concurrency (32 in flight is common), so a busy session
// spawns none in steady state; a session that never calls keeps none, and
// one that did keeps at most this many (about 700 bytes each).
const maxIdleInvokers = 32

// Receive implements actor.Actor.
func (w *invoker) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *startCall:
		if !msg.inv.claimed.CompareAndSwap(false, true) {
			return // the session cancelled it before it started
		}
		w.gen++
		w.cur = msg.inv
		w.cur.gen = w.gen
		w.cur.start(ctx)
	case *actor.Stopping:
		if w.cur != nil {
			w.cur.stopping(ctx)
		}
	case *actor.Started, *actor.Stopped, *actor.Restarting, *actor.Terminated:
	default:
		if w.cur != nil {
			w.cur.receive(ctx)
		}
	}
}

// HandleFailure makes the invoker the supervisor of its call's approval:
// a panic there becomes an internal-error result whose correlation id
// leads to the stack in the log.
func (w *invoker) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	sup.StopChildren(child)
	inv := w.cur
	if inv == nil || inv.done {
		return
	}
	value, stack := panicDetails(reason)
	inv.logAt(slog.LevelError, "approval panicked", "panic", value, "stack", stack)
	inv.fail(&tools.Error{Kind: tools.KindInternal, Message: "internal error in " + inv.tool})
}
