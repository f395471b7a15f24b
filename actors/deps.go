package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/actors/httptransport"
	"troupe/audit"
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
	auditor *audit.Writer
	// grace is how long calls may run on once a session's input ends or
	// a shutdown starts; server is the server actor, which sessions tell
	// of their end (set as it starts, before any session).
	grace  time.Duration
	server *actor.PID
	// observer watches sessions and calls (Options.Observer); nil: nobody.
	observer Observer
	// table is the method table every session serves by (table.go);
	// methodCall the row of the methods beside MCP (session.besideMCP).
	table      methodTable
	methodCall *method
}

// hostOptions are the resolved options every session of a Host uses.
type hostOptions struct {
	session      SessionOptions
	maxLineBytes int
	exec         *hostDeps
	http         HTTPOptions
	httpLimits   httptransport.Limits // http, as the HTTP transport reads it
}
