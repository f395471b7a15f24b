// Package framing is troupe's newline-delimited JSON-RPC stream: the stdio
// transport's wire, as a jsonrpc2.ObjectStream.
//
// jsonrpc2's own plain stream decodes with a json.Decoder, which is not line
// framed: a truncated line swallows the next one, and an invalid id or a
// batch closes the connection. Stream instead reads one line at a time (with
// a size limit), checks it against JSON-RPC 2.0 and MCP's rules, answers
// anything malformed itself with the right error (-32700 with "id": null for
// unparsable lines, -32600 for invalid requests) and hands only well-formed
// messages to jsonrpc2. A bad line therefore costs exactly one error reply
// and never the next message.
//
// A message that names a member twice is bad too (checkMembers): readers
// would disagree on its value. So is one whose envelope, params or _meta
// names a member in two cases ("name" and "NAME"), which encoding/json
// reads as one struct field. Check and Decode apply the same rules to
// messages that arrive another way (an HTTP POST).
//
// Batches (JSON arrays) are part of protocol revision 2025-03-26 only. When
// enabled with SetBatches, a batch's members are handed on one at a time and
// their responses are collected and written back as one array, as JSON-RPC
// requires; otherwise a batch is an invalid request.
//
// With Options.MaxPending the stream applies back-pressure: it counts the
// requests it has handed to its reader whose responses it has not written
// yet, and reads no further line while that many are owed. A client that
// stops reading the output is then no longer read either, so what a server
// holds for it (queued requests, their answers) stays bounded, and every
// request is still answered once the client reads again.
package framing

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/sourcegraph/jsonrpc2"
)

// DefaultMaxLineBytes is the largest message accepted when Options leaves it 0.
const DefaultMaxLineBytes = 4 << 20

// Options configure a Stream. The zero value is usable.
type Options struct {
	// MaxLineBytes is the largest line accepted; longer lines are discarded
	// and answered with an invalid-request error. 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// Logger receives a debug record for each rejected line; nil discards.
	Logger *slog.Logger
	// MaxPending bounds the requests handed to the reader whose responses
	// have not been written (nor skipped): before reading another line the
	// reader waits while that many are owed, and then until at most
	// ResumeAt are. Notifications and responses from the client take no
	// room. The members of one batch are handed on even past the bound
	// (their answers go out together, so holding some back could never
	// end); the line limit bounds a batch. 0 means no bound, for a stream
	// whose reader is not a server.
	MaxPending int
	// ResumeAt is how few requests must be owed before a waiting reader
	// reads again, so a lagging client is read and answered in runs, not a
	// message per syscall. It must exceed what may stay owed for long (a
	// server's calls in flight, which may wait on the client's answers),
	// or the reader could wait on them. 0 or more than MaxPending-1 means
	// MaxPending/2.
	ResumeAt int
	// AllowDuplicateMembers turns off the check that refuses a message
	// naming a member twice (checkMembers), for a stream whose peer is a
	// server troupe called: its results are passed on as they came, and a
	// response dropped for its shape would leave its call waiting. Client
	// streams keep the check.
	AllowDuplicateMembers bool
}

// Stream reads and writes newline-delimited JSON-RPC messages. Reads must
// come from one goroutine (jsonrpc2's read loop); writes may come from any.
type Stream struct {
	r       *bufio.Reader
	max     int
	log     *slog.Logger
	batches atomic.Bool
	members bool // refuse duplicate members (not Options.AllowDuplicateMembers)
	// maxPending, resumeAt and pending are the back-pressure
	// (Options.MaxPending, Options.ResumeAt).
	maxPending int
	resumeAt   int
	pending    pending

	// queue holds the valid messages (a line's, or a batch's members) not
	// yet handed to the reader.
	queue []checked

	wmu     sync.Mutex
	w       io.Writer
	wclosed bool
	queued  []byte   // lines Queue holds for the next Flush
	answers int      // responses among the queued lines: pending until written
	open    []*batch // batches whose responses are still being collected
}

// checked is one valid message, raw (for ReadObject) and decoded (for
// ReadMessage).
type checked struct {
	raw []byte
	msg Message
}

// batch collects the responses to the requests of one incoming batch.
type batch struct {
	waiting map[jsonrpc2.ID]bool
	replies [][]byte
	answers int // replies that answer requests handed to the reader
}

// New returns a Stream reading r and writing w.
func New(r io.Reader, w io.Writer, opts Options) *Stream {
	max := opts.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Stream{r: bufio.NewReaderSize(r, 64<<10), max: max, log: log, w: w,
		maxPending: opts.MaxPending, resumeAt: opts.ResumeAt, members: !opts.AllowDuplicateMembers}
	if s.resumeAt <= 0 || s.resumeAt >= s.maxPending {
		s.resumeAt = s.maxPending / 2
	}
	s.pending.init()
	return s
}

// Pending is how many requests handed to the reader are still owed a
// response (not written, not skipped).
func (s *Stream) Pending() int { return s.pending.count() }

// Buffered is how many bytes Queue holds for the next Flush.
func (s *Stream) Buffered() int {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return len(s.queued)
}

// SetBatches enables or disables JSON-RPC batches; the session turns them on
// when it negotiates a revision that has them.
func (s *Stream) SetBatches(on bool) { s.batches.Store(on) }

// errLineTooLong marks a line over the size limit (already discarded).
var errLineTooLong = errors.New("line too long")

// ReadObject reads the next well-formed message into v, which is how
// jsonrpc2.Conn reads a Stream. It returns an error only when the input
// ends or fails; malformed lines are answered and skipped.
func (s *Stream) ReadObject(v any) error {
	for {
		c, err := s.next()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(c.raw, v); err != nil {
			// Checked by classify already; a failure here is a bug, but
			// it must still cost only this message.
			s.log.Error("framing: checked message failed to decode", "err", err)
			s.reply(nil, jsonrpc2.CodeInvalidRequest, "invalid request")
			continue
		}
		return nil
	}
}

// ReadMessage returns the next well-formed message, decoded in the same
// pass that checked it: the read path of a server that dispatches messages
// itself. It returns an error only when the input ends or fails; malformed
// lines are answered and skipped.
func (s *Stream) ReadMessage() (Message, error) {
	c, err := s.next()
	return c.msg, err
}

// next returns the next valid message, reading lines as needed. Before
// reading a line it waits for room (Options.MaxPending).
func (s *Stream) next() (checked, error) {
	for {
		if len(s.queue) > 0 {
			c := s.queue[0]
			s.queue[0] = checked{}
			s.queue = s.queue[1:]
			if s.maxPending > 0 && c.msg.Request != nil && !c.msg.Request.Notif {
				s.pending.add(1)
			}
			return c, nil
		}
		if err := s.waitRoom(); err != nil {
			return checked{}, err
		}
		line, err := s.readLine()
		if errors.Is(err, errLineTooLong) {
			s.log.Debug("framing: rejected oversized line", "limit", s.max)
			s.reply(nil, jsonrpc2.CodeInvalidRequest, fmt.Sprintf("message exceeds the %d-byte limit", s.max))
			continue
		}
		if len(bytes.TrimSpace(line)) > 0 {
			s.accept(line)
		}
		if err != nil {
			if len(s.queue) > 0 {
				continue // hand out what the last line held before reporting the end
			}
			return checked{}, err
		}
	}
}

// waitRoom returns once the reader may read another line: fewer than
// MaxPending requests are owed. It fails once the output is closed, since
// nothing owed can be written any more.
func (s *Stream) waitRoom() error {
	if s.maxPending <= 0 {
		return nil
	}
	if owed := s.pending.count(); owed >= s.maxPending {
		s.log.Debug("framing: the client is not reading; input paused until it does", "owed", owed)
	}
	return s.pending.wait(s.maxPending, s.resumeAt)
}

// readLine returns the next line without its newline. A line longer than
// the limit is consumed and reported as errLineTooLong. At the end of input
// it returns the last unterminated line, if any, with io.EOF.
func (s *Stream) readLine() ([]byte, error) {
	var buf []byte
	over := false
	for {
		chunk, err := s.r.ReadSlice('\n')
		if !over {
			if len(buf)+len(chunk) > s.max+1 { // +1: the newline itself
				over, buf = true, nil
			} else if buf == nil && err == nil {
				return chunk[:len(chunk)-1], nil // fast path: the whole line was buffered
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == nil:
			if over {
				return nil, errLineTooLong
			}
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			if over {
				return nil, errLineTooLong
			}
			return buf, err
		}
	}
}

// accept classifies one line: a valid message (or batch members) goes to the
// queue, anything else is answered here.
func (s *Stream) accept(line []byte) {
	if !utf8.Valid(line) {
		s.reply(nil, jsonrpc2.CodeParseError, "parse error: message is not valid UTF-8")
		return
	}
	trimmed := bytes.TrimLeft(line, " \t\r")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		s.acceptBatch(line)
		return
	}
	msg, perr := classify(line, s.members)
	if perr != nil {
		s.log.Debug("framing: rejected message", "code", perr.code, "reason", perr.message)
		if perr.answered() {
			s.reply(perr.id, perr.code, perr.message)
		}
		return
	}
	s.queue = append(s.queue, checked{raw: line, msg: msg})
}

func (s *Stream) acceptBatch(line []byte) {
	var members []json.RawMessage
	if err := json.Unmarshal(line, &members); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			s.reply(nil, jsonrpc2.CodeParseError, "parse error: "+err.Error())
		} else {
			s.reply(nil, jsonrpc2.CodeInvalidRequest, "invalid request")
		}
		return
	}
	if !s.batches.Load() {
		s.reply(nil, jsonrpc2.CodeInvalidRequest, "batch requests are not supported by the negotiated protocol version")
		return
	}
	if len(members) == 0 {
		s.reply(nil, jsonrpc2.CodeInvalidRequest, "invalid request: empty batch")
		return
	}
	b := &batch{waiting: map[jsonrpc2.ID]bool{}}
	var valid []checked
	for _, m := range members {
		msg, perr := classify(m, s.members)
		if perr != nil {
			if perr.answered() {
				b.replies = append(b.replies, errorLine(perr.id, perr.code, perr.message))
			}
			continue
		}
		if req := msg.Request; req != nil && !req.Notif {
			if b.waiting[req.ID] {
				b.replies = append(b.replies, errorLine(nil, jsonrpc2.CodeInvalidRequest, "duplicate id in batch"))
				continue
			}
			b.waiting[req.ID] = true
		}
		valid = append(valid, checked{raw: m, msg: msg})
	}
	s.wmu.Lock()
	s.open = append(s.open, b)
	s.flushBatchesLocked()
	s.wmu.Unlock()
	s.queue = append(s.queue, valid...)
}

// WriteObject writes one message as a line. A response that belongs to an
// open batch is held until the batch is complete.
func (s *Stream) WriteObject(obj any) error { return s.put(obj, true) }

// Queue is WriteObject for a writer that sends several messages in a row:
// the line is held until Flush, so the messages share one write. Batch
// responses are collected as WriteObject collects them, and any immediate
// write sends what is queued first, so the output keeps the order of the
// calls.
func (s *Stream) Queue(obj any) error { return s.put(obj, false) }

func (s *Stream) put(obj any, flush bool) error {
	b, err := encode(obj)
	if err != nil {
		return err
	}
	resp, answer := obj.(*jsonrpc2.Response)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if answer && s.collectLocked(resp.ID, b, true) {
		return nil
	}
	n := 0
	if answer {
		n = 1
	}
	if flush {
		return s.writeLocked(b, n)
	}
	if s.wclosed {
		return io.ErrClosedPipe
	}
	s.queued = append(append(s.queued, b...), '\n')
	s.answers += n
	return nil
}

// Flush writes what Queue holds.
func (s *Stream) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.flushLocked()
}

func (s *Stream) flushLocked() error {
	if len(s.queued) == 0 || s.wclosed {
		return nil
	}
	_, err := s.w.Write(s.queued)
	if cap(s.queued) > 1<<20 {
		s.queued = nil // a burst of large results: do not keep its buffer
	} else {
		s.queued = s.queued[:0]
	}
	// Written, or lost with a failed output: either way no longer owed.
	if s.maxPending > 0 {
		s.pending.done(s.answers)
	}
	s.answers = 0
	return err
}

// Skip tells the stream that request id will get no response (it was
// cancelled), so a batch waiting for it can complete, and the request is no
// longer owed (Options.MaxPending).
func (s *Stream) Skip(id jsonrpc2.ID) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.collectLocked(id, nil, false)
	if s.maxPending > 0 {
		s.pending.done(1)
	}
}

// collectLocked files reply (nil: none will come) for id if an open batch
// waits for it, and writes the batches it completes. answer says reply
// answers a request handed to the reader, owed until the batch is written.
func (s *Stream) collectLocked(id jsonrpc2.ID, reply []byte, answer bool) bool {
	for _, b := range s.open {
		if b.waiting[id] {
			delete(b.waiting, id)
			if reply != nil {
				b.replies = append(b.replies, reply)
				if answer {
					b.answers++
				}
			}
			s.flushBatchesLocked()
			return true
		}
	}
	return false
}

// flushBatchesLocked writes every completed batch as one array line.
func (s *Stream) flushBatchesLocked() {
	kept := s.open[:0]
	for _, b := range s.open {
		if len(b.waiting) > 0 {
			kept = append(kept, b)
			continue
		}
		if len(b.replies) > 0 { // a batch of notifications gets no reply at all
			line := append([]byte{'['}, bytes.Join(b.replies, []byte{','})...)
			_ = s.writeLocked(append(line, ']'), b.answers)
		}
	}
	clear(s.open[len(kept):])
	s.open = kept
}

// reply writes an error response built by the stream itself. id is the raw
// id token when one could be read, nil for "id": null.
func (s *Stream) reply(id json.RawMessage, code int64, message string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.writeLocked(errorLine(id, code, message), 0)
}

// writeLocked writes line b now, after what is queued. answers is how many
// owed requests it answers. Once the output is closed nothing is counted
// any more: the reader has been released for good.
func (s *Stream) writeLocked(b []byte, answers int) error {
	if s.wclosed {
		return io.ErrClosedPipe
	}
	s.queued = append(append(s.queued, b...), '\n')
	s.answers += answers
	return s.flushLocked()
}

// Close is called by jsonrpc2 when reading ends. It does not close the
// writer: responses to calls still running must be able to go out (the
// drain phase); the owner calls CloseWrite when done.
func (s *Stream) Close() error { return nil }

// CloseWrite writes what is queued and stops all further writes; later
// writes fail.
func (s *Stream) CloseWrite() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.flushLocked()
	s.wclosed = true
	s.pending.close()
	if c, ok := s.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// errorLine renders a JSON-RPC error response by hand, because jsonrpc2's
// Response cannot carry "id": null.
func errorLine(id json.RawMessage, code int64, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	msg, _ := json.Marshal(message)
	out := make([]byte, 0, 64+len(id)+len(msg))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":{"code":`...)
	out = fmt.Appendf(out, "%d", code)
	out = append(out, `,"message":`...)
	out = append(out, msg...)
	return append(out, "}}"...)
}

// Encode renders one message (a *jsonrpc2.Response, a *jsonrpc2.Request,
// or any JSON-RPC message value) as one line of JSON, without the newline.
// The HTTP transport uses it for its events as the stream does for lines.
func Encode(obj any) ([]byte, error) { return encode(obj) }

// encode renders one message as a line. A response with a result, the
// common case, is written directly: its result is already JSON (the
// session encoded it), and encoding/json would check and copy it again
// through jsonrpc2's MarshalJSON. The member order is jsonrpc2's.
func encode(obj any) ([]byte, error) {
	resp, ok := obj.(*jsonrpc2.Response)
	if !ok || resp.Error != nil || resp.Result == nil || !json.Valid(*resp.Result) ||
		bytes.IndexByte(*resp.Result, '\n') >= 0 {
		return json.Marshal(obj)
	}
	result := *resp.Result
	b := make([]byte, 0, len(result)+48)
	b = append(b, `{"id":`...)
	if resp.ID.IsString {
		id, err := json.Marshal(resp.ID.Str)
		if err != nil {
			return nil, err
		}
		b = append(b, id...)
	} else {
		b = strconv.AppendUint(b, resp.ID.Num, 10)
	}
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, `,"jsonrpc":"2.0"}`...), nil
}
