package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
)

// toolNotice is progress or a log message from a running tool, sent to the
// session, which knows the progress token and the client's log level.
type toolNotice struct {
	quiet
	id    jsonrpc2.ID
	tool  string
	isLog bool
	// progress
	done, total float64
	message     string
	// log
	level protocol.LoggingLevel
	data  any
}

// reporter implements tools.Reporter by messaging the session. It never
// blocks: Send only enqueues.
type reporter struct {
	root    *actor.RootContext
	session *actor.PID
	id      jsonrpc2.ID
	tool    string
}

func newReporter(root *actor.RootContext, session *actor.PID, id jsonrpc2.ID, tool string) *reporter {
	return &reporter{root: root, session: session, id: id, tool: tool}
}

// Progress implements tools.Reporter.
func (r *reporter) Progress(done, total float64, message string) {
	r.root.Send(r.session, &toolNotice{id: r.id, tool: r.tool, done: done, total: total, message: message})
}

// Log implements tools.Reporter.
func (r *reporter) Log(level protocol.LoggingLevel, data any) {
	r.root.Send(r.session, &toolNotice{id: r.id, tool: r.tool, isLog: true, level: level, data: data})
}
