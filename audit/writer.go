package audit

import (
	"log/slog"
	"sync"
	"time"
)

// Writer appends the records a server gives it to a Log in the background,
// so that the file's lock, write and fsync never run on the path of a call:
// troupe's invocations hand their records to one Writer, which outlives
// every session and is closed when the server stops.
//
// Records are group-committed: the first record of a batch starts a timer
// of FlushDelay, and when it fires every record that arrived meanwhile
// is written with one write and one fsync (Log.AppendAll). A busy server
// thus pays the disk once per batch instead of once per call (an fsync per
// call was a tenth of the server's CPU at 12,000 calls/s), so the log
// keeps up with any call rate; a record reaches the disk at most
// FlushDelay (plus one fsync) after it was given. Whoever gives a record
// never waits for the disk.
//
// It is a mutex and a timer, not a goroutine with a queue: handing a record
// over is an append under a lock, which costs less than a channel send to
// a busy reader, and the only goroutine is the timer's, which Close waits
// for. A Writer is safe for concurrent use.
type Writer struct {
	log     *Log
	logger  *slog.Logger
	flushed func(records int, took time.Duration) // nil: nobody is told

	mu      sync.Mutex
	pending []Record
	timer   *time.Timer // armed while records are pending
	closed  bool

	writeMu sync.Mutex     // one batch is written at a time, in order
	flushes sync.WaitGroup // timer callbacks under way
	failed  bool           // a write failed; logged once until one succeeds again (under writeMu)
}

// FlushDelay is how long the first record of a batch waits for more.
const FlushDelay = 5 * time.Millisecond

// maxBatch bounds one write, so a burst is not held in memory for long.
const maxBatch = 512

// NewWriter returns a Writer appending to log. A failed write is logged to
// logger (once, until a write succeeds again: the records of a failed
// batch are lost, and saying so per batch would flood the log). flushed,
// when not nil, is told of each batch written, with its size and how long
// the write and fsync took (the server's metrics); it runs on the writing
// goroutine and must not block. The Writer does not close log.
func NewWriter(log *Log, logger *slog.Logger, flushed func(records int, took time.Duration)) *Writer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{log: log, logger: logger, flushed: flushed}
}

// Record queues r for the next batch, or writes it at once (with what is
// pending) when the batch is full or the Writer is closed, so a record
// given after Close is not lost.
func (w *Writer) Record(r *Record) {
	w.mu.Lock()
	w.pending = append(w.pending, *r)
	switch {
	case w.closed || len(w.pending) >= maxBatch:
		batch := w.take()
		w.writeMu.Lock() // taken before mu is released: batches stay in order
		w.mu.Unlock()
		w.write(batch)
		w.writeMu.Unlock()
		return
	case len(w.pending) == 1:
		w.flushes.Add(1)
		w.timer = time.AfterFunc(FlushDelay, func() {
			defer w.flushes.Done()
			w.flush()
		})
	}
	w.mu.Unlock()
}

// take empties the pending batch; under mu.
func (w *Writer) take() []Record {
	if w.timer != nil && w.timer.Stop() {
		w.flushes.Done() // its callback will not run
	}
	w.timer = nil
	batch := w.pending
	w.pending = nil
	return batch
}

// flush writes what is pending.
func (w *Writer) flush() {
	w.mu.Lock()
	batch := w.take()
	w.writeMu.Lock()
	w.mu.Unlock()
	w.write(batch)
	w.writeMu.Unlock()
}

// write appends one batch; under writeMu.
func (w *Writer) write(batch []Record) {
	if len(batch) == 0 {
		return
	}
	began := time.Now()
	err := w.log.AppendAll(batch)
	if w.flushed != nil && err == nil {
		w.flushed(len(batch), time.Since(began))
	}
	if err != nil {
		if !w.failed {
			w.logger.Error("audit log write failed; records are being lost", "err", err,
				"records", len(batch), "correlation_id", batch[0].CorrelationID)
		}
		w.failed = true
		return
	}
	w.failed = false
}

// Close writes what is pending and waits for a timer's flush under way;
// records given later (calls stopped after it) are written at once.
func (w *Writer) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.flush()
	w.flushes.Wait()
}
