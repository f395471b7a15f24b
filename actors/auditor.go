package actors

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/audit"
)

// auditor appends the audit records invocations send it, one at a time,
// so the file I/O (and its lock) never runs inside a call's actors. It is
// spawned by the Host beside the server actor and outlives every session.
type auditor struct {
	log    *audit.Log
	logger *slog.Logger
	failed bool // a write failed; logged once until one succeeds again
}

// Receive implements actor.Actor.
func (a *auditor) Receive(ctx actor.Context) {
	r, ok := ctx.Message().(*audit.Record)
	if !ok {
		return
	}
	if _, err := a.log.Append(*r); err != nil {
		if !a.failed {
			a.logger.Error("audit log write failed; records are being lost", "err", err, "correlation_id", r.CorrelationID)
		}
		a.failed = true
		return
	}
	a.failed = false
}
