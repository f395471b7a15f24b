package httptransport

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// Stream is one SSE stream of an HTTP session: the messages its session
// actor produced for it, as numbered events in a bounded log. The actor is
// the only writer and never blocks; an HTTP handler reads at its own pace.
// A reader that reconnects with Last-Event-ID is given what it missed, as
// long as it is still in the log; a reader that falls further behind than
// the log holds is cut off (ErrLagged) rather than letting a stalled client
// grow the server's memory.
type Stream struct {
	id        string
	maxEvents int
	maxBytes  int

	mu        sync.Mutex
	events    []Event // consecutive, oldest first
	bytes     int
	next      uint64 // Seq of the next event; the first is 1
	ended     bool   // no more events will be appended
	final     bool   // the last event completes the stream (a POST's response)
	cancelled bool   // ended because the client cancelled the request
	reading   bool   // a reader is attached
	// unkept: the session forgot the stream when it answered, as nothing
	// can resume it (see Transport.Send); Handle.Delivered then has
	// nothing to tell the session.
	unkept atomic.Bool
	wake   chan struct{}
	// written are the callbacks of events not yet read (Outbound.Written),
	// oldest first: called when a reader takes the event, when the log
	// drops it, or when the stream ends.
	written []writtenAt
}

// writtenAt is the Outbound.Written callback of event seq.
type writtenAt struct {
	seq uint64
	fn  func()
}

// Event is one message of a stream.
type Event struct {
	Seq   uint64
	Data  []byte // one JSON-RPC message
	Final bool   // the response that completes a POST stream
	// Error is the error a final event answers with, nil when it answers
	// with a result (an input_required result included): the HTTP front
	// chooses its status from it without decoding Data again.
	Error *jsonrpc2.Error
}

// ErrLagged means the events after the reader's position were dropped from
// the log: the reader fell too far behind.
var ErrLagged = errors.New("stream reader fell behind the replay buffer")

// ErrUnknownEvent means a Last-Event-ID names no stream, or a place in it
// that is no longer kept.
var ErrUnknownEvent = errors.New("unknown or expired event id")

// ErrReaderAttached means the stream already has a reader.
var ErrReaderAttached = errors.New("stream already has a reader")

func newStream(id string, maxEvents, maxBytes int) *Stream {
	return &Stream{id: id, maxEvents: maxEvents, maxBytes: maxBytes, next: 1, wake: make(chan struct{}, 1)}
}

// ID names the stream within its session.
func (s *Stream) ID() string { return s.id }

// EventID is the SSE id of event seq: the stream's id and the number, so a
// Last-Event-ID names both the stream to resume and the place in it.
func (s *Stream) EventID(seq uint64) string { return s.id + "-" + strconv.FormatUint(seq, 10) }

// append adds an event and wakes the reader (see push).
func (s *Stream) append(data []byte, final bool, written func()) {
	s.push(Event{Data: data, Final: final}, written)
}

// answer adds the final event: the response data, which answers with
// rpcErr when that is not nil.
func (s *Stream) answer(data []byte, rpcErr *jsonrpc2.Error, written func()) (first bool) {
	return s.push(Event{Data: data, Final: true, Error: rpcErr}, written)
}

// push adds ev (numbered here) and wakes the reader, and reports whether
// it is the stream's first event. Old events are dropped while the log is
// over its bounds; the newest event is always kept.
func (s *Stream) push(ev Event, written func()) (first bool) {
	data, final := ev.Data, ev.Final
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		if written != nil {
			written()
		}
		return false
	}
	first = s.next == 1
	if written != nil {
		s.written = append(s.written, writtenAt{seq: s.next, fn: written})
	}
	ev.Seq = s.next
	s.events = append(s.events, ev)
	s.next++
	s.bytes += len(data)
	drop := 0
	for len(s.events)-drop > 1 && (len(s.events)-drop > s.maxEvents || s.bytes > s.maxBytes) {
		s.bytes -= len(s.events[drop].Data)
		drop++
	}
	var release []func()
	if drop > 0 {
		release = s.takeWritten(s.events[drop-1].Seq)
		clear(s.events[:drop])
		s.events = s.events[drop:]
	}
	if final {
		s.final, s.ended = true, true
	}
	s.mu.Unlock()
	runAll(release)
	s.signal()
	return first
}

// takeWritten removes and returns the callbacks of events up to seq.
// Callers hold s.mu and run the callbacks after unlocking.
func (s *Stream) takeWritten(seq uint64) []func() {
	n := 0
	for n < len(s.written) && s.written[n].seq <= seq {
		n++
	}
	if n == 0 {
		return nil
	}
	fns := make([]func(), n)
	for i := range n {
		fns[i] = s.written[i].fn
	}
	clear(s.written[:n])
	s.written = s.written[n:]
	return fns
}

func runAll(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}

// end marks the stream complete without a final event: the session ended
// (cancelled false) or the client cancelled the request (true).
func (s *Stream) end(cancelled bool) {
	s.mu.Lock()
	if !s.ended {
		s.ended, s.cancelled = true, cancelled
	}
	release := s.takeWritten(s.next)
	s.mu.Unlock()
	runAll(release)
	s.signal()
}

// Cancelled reports whether the stream ended because the client cancelled
// its request (rather than because the session ended).
func (s *Stream) Cancelled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Attach makes the caller the stream's only reader until detach is called.
func (s *Stream) Attach() (detach func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reading {
		return nil, ErrReaderAttached
	}
	s.reading = true
	return func() {
		s.mu.Lock()
		s.reading = false
		s.mu.Unlock()
	}, nil
}

func (s *Stream) isEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

func (s *Stream) hasReader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reading
}

// Read returns the events after seq after, waiting up to wait for some to
// arrive (0: wait until ctx is done). done reports that the stream has
// ended and every event has been returned. A reader whose position was
// dropped from the log gets ErrLagged.
func (s *Stream) Read(ctx context.Context, after uint64, wait time.Duration) (events []Event, done bool, err error) {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		s.mu.Lock()
		if len(s.events) > 0 && after+1 < s.events[0].Seq {
			s.mu.Unlock()
			return nil, false, ErrLagged
		}
		for _, e := range s.events {
			if e.Seq > after {
				events = append(events, e)
			}
		}
		ended := s.ended
		var release []func()
		if len(events) > 0 {
			release = s.takeWritten(events[len(events)-1].Seq)
		}
		s.mu.Unlock()
		runAll(release)
		if len(events) > 0 || ended {
			return events, ended, nil
		}
		select {
		case <-s.wake:
		case <-timeout:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// Contains reports whether events after seq after can still be replayed.
func (s *Stream) Contains(after uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return after < s.next && (len(s.events) == 0 || after+1 >= s.events[0].Seq)
}

// Final reports whether the stream was completed by a final event.
func (s *Stream) Final() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.final
}
