package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/redact"
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
	auditor *auditWriter
}

