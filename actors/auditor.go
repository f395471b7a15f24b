package actors

import (
	"log/slog"
	"sync"
	"time"

	"troupe/audit"
)

// auditWriter appends the audit records invocations give it, so the file
// I/O (and its lock and fsync) never runs inside a call's actors. The Host
// owns it; it outlives every session.
//
// Records are group-committed: the first record of a batch starts a timer
// of auditFlushDelay, and when it fires every record that arrived meanwhile
// is written with one write and one fsync. A busy server thus pays the
// disk once per batch instead of once per call (an fsync per call was a
// tenth of the server's CPU at 12,000 calls/s), so the log keeps up with
// any call rate; a record reaches the disk at most auditFlushDelay (plus
// one fsync) after its call ended. The client's answer never waits for
// the audit log in any case.
//
// It is a mutex and a timer, not an actor: handing a record over is an
// append under a lock, which costs a call less than a mailbox delivery,
// and the only goroutine is the timer's, which the writer waits for at
// close.
type auditWriter struct {
	log      *audit.Log
	logger   *slog.Logger
	observer Observer // told of each batch written; nil: nobody

	mu      sync.Mutex
	pending []audit.Record
	timer   *time.Timer // armed while records are pending
	closed  bool

	writeMu sync.Mutex     // one batch is written at a time, in order
	flushes sync.WaitGroup // timer callbacks under way
	failed  bool           // a write failed; logged once until one succeeds again (under writeMu)
}

// auditFlushDelay is how long the first record of a batch waits for more.
const auditFlushDelay = 5 * time.Millisecond

// maxAuditBatch bounds one write, so a burst is not held in memory for long.
const maxAuditBatch = 512

func newAuditWriter(log *audit.Log, logger *slog.Logger, observer Observer) *auditWriter {
	return &auditWriter{log: log, logger: logger, observer: observer}
}

// record queues r for the next batch. After close it is written at once.
func (a *auditWriter) record(r *audit.Record) {
	a.mu.Lock()
	a.pending = append(a.pending, *r)
	switch {
	case a.closed || len(a.pending) >= maxAuditBatch:
		batch := a.take()
		a.writeMu.Lock() // taken before mu is released: batches stay in order
		a.mu.Unlock()
		a.write(batch)
		a.writeMu.Unlock()
		return
	case len(a.pending) == 1:
		a.flushes.Add(1)
		a.timer = time.AfterFunc(auditFlushDelay, func() {
			defer a.flushes.Done()
			a.flush()
		})
	}
	a.mu.Unlock()
}

// take empties the pending batch; under mu.
func (a *auditWriter) take() []audit.Record {
	if a.timer != nil && a.timer.Stop() {
		a.flushes.Done() // its callback will not run
	}
	a.timer = nil
	batch := a.pending
	a.pending = nil
	return batch
}

// flush writes what is pending.
func (a *auditWriter) flush() {
	a.mu.Lock()
	batch := a.take()
	a.writeMu.Lock()
	a.mu.Unlock()
	a.write(batch)
	a.writeMu.Unlock()
}

// write appends one batch; under writeMu.
func (a *auditWriter) write(batch []audit.Record) {
	if len(batch) == 0 {
		return
	}
	began := time.Now()
	err := a.log.AppendAll(batch)
	if a.observer != nil && err == nil {
		a.observer.AuditFlushed(len(batch), time.Since(began))
	}
	if err != nil {
		if !a.failed {
			a.logger.Error("audit log write failed; records are being lost", "err", err,
				"records", len(batch), "correlation_id", batch[0].CorrelationID)
		}
		a.failed = true
		return
	}
	a.failed = false
}

// close writes what is pending and waits for a timer's flush under way;
// records that come later (calls stopped after it) are written at once.
func (a *auditWriter) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.flush()
	a.flushes.Wait()
}
