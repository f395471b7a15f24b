package actors

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/audit"
)

// auditor appends the audit records invocations send it, so the file I/O
// (and its lock and fsync) never runs inside a call's actors. It is spawned
// by the Host beside the server actor and outlives every session.
//
// Records are group-committed: the first record of a batch starts a timer
// of auditFlushDelay, and when it fires every record that arrived meanwhile
// is written with one write and one fsync. A busy server thus pays the
// disk once per batch instead of once per call (an fsync per call was a
// tenth of the server's CPU at 12,000 calls/s), so the log keeps up with
// any call rate; a record reaches the disk at most auditFlushDelay (plus
// one fsync) after its call ended. The client's answer never waits for
// the audit log in any case.
type auditor struct {
	log     *audit.Log
	logger  *slog.Logger
	pending []audit.Record
	timer   *time.Timer // runs while records are pending
	failed  bool        // a write failed; logged once until one succeeds again
}

// auditFlushDelay is how long the first record of a batch waits for more.
const auditFlushDelay = 5 * time.Millisecond

// flushAudit tells the auditor to write what it holds.
type flushAudit struct{ quiet }

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
			root, self := ctx.ActorSystem().Root, ctx.Self()
			a.timer = time.AfterFunc(auditFlushDelay, func() { root.Send(self, flushAudit{}) })
		}
	case flushAudit:
		a.flush()
	case *actor.Stopping:
		a.flush() // Poison queues behind the records: nothing is left out
	}
}

func (a *auditor) flush() {
	if a.timer != nil {
		a.timer.Stop() // a late flushAudit finds nothing pending: harmless
		a.timer = nil
	}
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
