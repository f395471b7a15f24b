package actors

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/audit"
)

// auditor appends the audit records invocations send it, so the file I/O
// (and its lock and fsync) never runs inside a call's actors. It is spawned
// by the Host beside the server actor and outlives every session.
//
// Records are group-committed: a record is held until the auditor's own
// flushAudit message, sent behind it, comes out of the mailbox; by then
// every record queued meanwhile has joined it, and one write and one fsync
// serve them all. An idle server still writes each record at once (the
// flush is right behind it), while a busy one pays the disk once per batch
// instead of once per call, so the log keeps up with any call rate.
type auditor struct {
	log     *audit.Log
	logger  *slog.Logger
	pending []audit.Record
	failed  bool // a write failed; logged once until one succeeds again
}

// flushAudit tells the auditor to write what it holds.
type flushAudit struct{}

// maxAuditBatch bounds one write, so a burst is not held in memory for long.
const maxAuditBatch = 512

// Receive implements actor.Actor.
func (a *auditor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *audit.Record:
		a.pending = append(a.pending, *m)
		switch {
		case len(a.pending) >= maxAuditBatch:
			a.flush()
		case len(a.pending) == 1:
			ctx.Send(ctx.Self(), flushAudit{})
		}
	case flushAudit:
		a.flush()
	case *actor.Stopping:
		a.flush() // Poison queues behind the records: nothing is left out
	}
}

func (a *auditor) flush() {
	if len(a.pending) == 0 {
		return
	}
	batch := a.pending
	defer func() {
		clear(batch) // drop the records' strings; keep the array
		a.pending = batch[:0]
	}()
	if err := a.log.AppendAll(batch); err != nil {
		if !a.failed {
			a.logger.Error("audit log write failed; records are being lost", "err", err,
				"records", len(batch), "correlation_id", batch[0].CorrelationID)
		}
		a.failed = true
		return
	}
	a.failed = false
}
