package command

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"troupe/protocol"
	"troupe/tools"
)

// Streaming limits.
const (
	// streamInterval is how often buffered lines are sent: at most ten
	// progress notifications a second, and at most ten log messages a
	// second for each of stdout and stderr, unless a batch fills up
	// (maxPendingBytes): then it goes at once, as fast as the client
	// takes it.
	streamInterval = 100 * time.Millisecond
	// maxStreamLine is where a long line is cut; the rest of it, up to the
	// next newline, is dropped from the stream (not from the result).
	maxStreamLine = 4 << 10
	// maxPendingBytes bounds the lines waiting for the next send, per
	// stream. When it is reached the pipe readers wait for the next send,
	// and the sends wait for the client (tools.Reporter.Ready): a slow
	// client slows the program down. Lines are dropped (and counted) only
	// once the call is being stopped.
	maxPendingBytes = 64 << 10
)

// Which stream a line came from.
const (
	stdoutStream = iota
	stderrStream
)

// streamer forwards a running program's output lines to the client as
// progress and log notifications. The readers of the program's pipes hand
// it chunks; lines pile up (boundedly) and a ticker goroutine sends them in
// batches, so a chatty program does not flood the client, and a slow
// client makes the readers wait rather than the queue grow.
type streamer struct {
	ctx    context.Context // the call's: waiting ends with it
	req    *tools.Request
	tool   string
	redact func(string) string

	mu      sync.Mutex
	streams [2]lineBuffer
	room    chan struct{} // signalled after each send: writers may go on
	full    chan struct{} // signalled by a writer that found the queue full: send now

	sent float64 // lines sent so far: the progress counter (ticker goroutine only)
	stop chan struct{}
	done chan struct{}
}

// lineBuffer splits one stream into lines and holds those not yet sent.
type lineBuffer struct {
	partial  []byte // the line being read, up to maxStreamLine bytes
	skipping bool   // the current line was too long: drop up to its newline
	lines    []string
	bytes    int
	dropped  int
}

// newStreamer starts the ticker; close must be called once the readers
// are done.
func newStreamer(ctx context.Context, req *tools.Request, tool string, redact func(string) string) *streamer {
	s := &streamer{ctx: ctx, req: req, tool: tool, redact: redact, room: make(chan struct{}, 1),
		full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

// write takes a chunk of the stream's output, first waiting while the
// lines not yet sent fill the queue (unless ctx is done: then the chunk
// is taken and, if there is no room, its lines are counted as dropped).
func (s *streamer) write(ctx context.Context, stream int, p []byte) {
	for {
		s.mu.Lock()
		if s.streams[stream].bytes < maxPendingBytes || ctx.Err() != nil {
			break
		}
		s.mu.Unlock()
		select {
		case s.full <- struct{}{}:
		default:
		}
		select {
		case <-s.room:
		case <-ctx.Done():
		case <-s.stop:
		}
	}
	defer s.mu.Unlock()
	b := &s.streams[stream]
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b.take(p)
			return
		}
		b.take(p[:i])
		b.endLine()
		p = p[i+1:]
	}
}

// take appends to the current line, cutting it at maxStreamLine.
func (b *lineBuffer) take(p []byte) {
	if b.skipping {
		return
	}
	room := maxStreamLine - len(b.partial)
	if len(p) <= room {
		b.partial = append(b.partial, p...)
		return
	}
	// Take a few bytes more than fit, so the cut can tell a character
	// split at the limit from one that ends there.
	b.partial = append(b.partial, p[:min(len(p), room+utf8.UTFMax-1)]...)
	b.add(string(b.partial[:tools.UTF8Cut(b.partial, maxStreamLine)]) + " [line cut]")
	b.partial = b.partial[:0]
	b.skipping = true
}

// endLine finishes the current line at a newline (or at the end of the
// stream).
func (b *lineBuffer) endLine() {
	if b.skipping {
		b.skipping = false
		return
	}
	b.add(strings.TrimSuffix(string(b.partial), "\r"))
	b.partial = b.partial[:0]
}

func (b *lineBuffer) add(line string) {
	// Twice the bound: write waits at the bound, but one chunk (32 KiB)
	// may take the buffer over it.
	if b.bytes+len(line)+1 > 2*maxPendingBytes { // +1: the newline that joins it
		b.dropped++
		return
	}
	b.lines = append(b.lines, line)
	b.bytes += len(line) + 1
}

// closeStream sends a last line that had no newline.
func (s *streamer) closeStream(stream int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := &s.streams[stream]; len(b.partial) > 0 {
		b.endLine()
	}
}

func (s *streamer) loop() {
	defer close(s.done)
	t := time.NewTicker(streamInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.flush()
		case <-s.full:
			// A full queue goes out at once: the interval limits how
			// often few lines are sent, not how fast many may flow.
			s.flush()
		case <-s.stop:
			s.flush()
			return
		}
	}
}

// close sends what is left and stops the ticker.
func (s *streamer) close() {
	close(s.stop)
	<-s.done
}

// flush sends the lines gathered since the last flush: one progress
// notification carrying the newest line, and one log message per stream
// carrying all of them (info for stdout, warning for stderr).
func (s *streamer) flush() {
	s.mu.Lock()
	var batch [2]lineBuffer
	for i := range s.streams {
		b := &s.streams[i]
		batch[i] = lineBuffer{lines: b.lines, dropped: b.dropped}
		b.lines, b.bytes, b.dropped = nil, 0, 0
	}
	s.mu.Unlock()
	defer func() {
		select {
		case s.room <- struct{}{}:
		default:
		}
	}()

	n := 0
	var newest string
	for i, b := range batch {
		n += len(b.lines) + b.dropped
		if len(b.lines) > 0 && (i == stdoutStream || newest == "") {
			newest = b.lines[len(b.lines)-1]
		}
	}
	if n == 0 {
		return
	}
	if s.req.Reporter != nil && s.req.Reporter.Ready(s.ctx) != nil {
		return // the call is over; nobody will read these lines
	}
	s.sent += float64(n)
	s.req.Progress(s.sent, 0, tools.ValidText([]byte(s.redact(newest))))
	for i, b := range batch {
		if len(b.lines) == 0 && b.dropped == 0 {
			continue
		}
		data := map[string]any{
			"tool":   s.tool,
			"stream": []string{"stdout", "stderr"}[i],
			"text":   tools.ValidText([]byte(s.redact(strings.Join(b.lines, "\n")))),
		}
		if b.dropped > 0 {
			data["droppedLines"] = b.dropped
		}
		level := protocol.LevelInfo
		if i == stderrStream {
			level = protocol.LevelWarning
		}
		s.req.Log(level, data)
	}
}
