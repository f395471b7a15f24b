package actors

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
)

// PanicError is a recovered panic with the stack where it happened. It is
// the failure reason supervisors see, whether the panic was in an actor's
// Receive or in a tool's goroutine.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string { return fmt.Sprintf("panic: %v", p.Value) }

// capturePanics is receiver middleware that records the stack of a panic in
// Receive before protoactor's mailbox recovers it (protoactor logs no
// stack), then panics again so supervision proceeds as usual.
func capturePanics(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		defer rethrowWithStack()
		next(c, env)
	}
}

// rethrowWithStack, deferred, turns a panic into a *PanicError with the
// stack where it happened and panics again, so supervision proceeds as
// usual with a reason that can be logged in full.
func rethrowWithStack() {
	if r := recover(); r != nil {
		if _, ok := r.(*PanicError); ok {
			panic(r)
		}
		panic(&PanicError{Value: r, Stack: debug.Stack()})
	}
}

// NewCorrelationID returns an id that ties a client-facing error to the
// server log line with its details (the HTTP front's refusals use it too).
func NewCorrelationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "c-" + hex.EncodeToString(b[:])
}

// panicDetails splits a failure reason into loggable value and stack.
func panicDetails(reason any) (value any, stack string) {
	if p, ok := reason.(*PanicError); ok {
		return p.Value, string(p.Stack)
	}
	return reason, ""
}

// quiet marks messages whose loss to a stopped actor is expected (late
// timers, late tool results), so dead letters are not logged for them.
type quiet struct{}

// IgnoreDeadLetterLogging implements actor.IgnoreDeadLetterLogging.
func (quiet) IgnoreDeadLetterLogging() {}
