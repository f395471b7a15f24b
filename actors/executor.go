package actors

import (
	"context"
	"runtime/debug"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/redact"
	"troupe/tools"
)

// hostDeps are what the actors of a Host share.
type hostDeps struct {
	// pool runs every actor's mailbox (see workerPool).
	pool *workerPool
	// propsOpts are the options props gives every actor, made once;
	// idleMailbox is the mailbox of long-lived actors (longLivedProps).
	propsOpts   []actor.PropsOption
	idleMailbox actor.PropsOption
	// running counts tool goroutines, so the Host can wait for every one of
	// them to end before the process exits.
	running sync.WaitGroup
	// secrets are the server's secret values, masked in approval prompts.
	secrets *redact.Live
	// auditor writes the audit log; nil when there is none.
	auditor *actor.PID
}

// executor runs one tool call. The tool runs in a goroutine the executor
// owns (Receive never blocks); stopping the executor cancels the tool's
// context, which is how cancellation and deadlines reach the tool.
type executor struct {
	tool   tools.Tool
	req    *tools.Request
	deps   *hostDeps
	cancel context.CancelFunc
}

// toolReturned carries the tool's return values from its goroutine.
type toolReturned struct {
	quiet
	res executorResult
}

// toolPanicked carries a panic recovered in the tool's goroutine.
type toolPanicked struct {
	quiet
	err *PanicError
}

// Receive implements actor.Actor.
func (e *executor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		e.run(ctx)
	case *toolReturned:
		ctx.Send(ctx.Parent(), &msg.res)
		ctx.Stop(ctx.Self())
	case *toolPanicked:
		// Re-raised inside Receive so the failure takes the supervision
		// path: the invocation's HandleFailure answers the call.
		panic(msg.err)
	case *actor.Stopping:
		if e.cancel != nil {
			e.cancel()
		}
	}
}

func (e *executor) run(ctx actor.Context) {
	runCtx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	self, root := ctx.Self(), ctx.ActorSystem().Root
	e.deps.running.Add(1)
	// The tool runs on a pool worker, whose stack has already grown, like
	// a mailbox does; a tool that blocks holds its worker and the pool
	// starts another for the next one (see workerPool).
	e.deps.pool.Schedule(func() {
		defer e.deps.running.Done()
		defer cancel()
		if e.req.Output != nil {
			defer e.req.Output.Close()
		}
		defer func() {
			if r := recover(); r != nil {
				root.Send(self, &toolPanicked{err: &PanicError{Value: r, Stack: debug.Stack()}})
			}
		}()
		res, err := e.tool.Call(runCtx, e.req)
		root.Send(self, &toolReturned{res: executorResult{result: res, err: err}})
	})
}
