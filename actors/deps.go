package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/redact"
)

// hostDeps are what the actors of a Host share.
type hostDeps struct {
	// pool runs every actor's mailbox (see workerPool).
	pool *workerPool
	// propsOpts are the options props gives every actor but sessions,
	// sessionOpts those of sessions (sessionProps); made once.
	propsOpts   []actor.PropsOption
	sessionOpts []actor.PropsOption
	// invokerProps spawn every invoker: made once, not per call.
	invokerProps *actor.Props
	// running counts tool goroutines, so the Host can wait for every one of
	// them to end before the process exits.
	running sync.WaitGroup
	// secrets are the server's secret values, masked in approval prompts.
	secrets *redact.Live
	// auditor writes the audit log; nil when there is none.
	auditor *auditWriter
}

// hostOptions are the resolved options every session of a Host uses.
type hostOptions struct {
	session      SessionOptions
	maxLineBytes int
	grace        time.Duration
	exec         *hostDeps
	http         HTTPOptions
	server       *actor.PID // set by the server as it starts; sessions report their end to it
}
