// Package stdio is the stream transport of troupe's sessions (stdio): one
// framed byte stream in each direction, a read loop that feeds the
// session, and the session's answers queued and written several per write
// when it is busy. See Transport.
package stdio

import (
	"io"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/transport"
	"troupe/protocol"
	"troupe/protocol/framing"
)

// Transport is the transport of one stream-based client (stdio): it owns
// the framing stream (the only writer of the output) and the read loop
// that feeds the session. The session lives until its input has ended and
// its calls are done (or the server stops it); as it stops, everything it
// queued is written and the output is closed.
//
// The read loop is troupe's own, not a jsonrpc2.Conn: the stream checks
// and decodes each line in one pass into jsonrpc2's types, and the loop
// forwards the result. jsonrpc2.Conn would decode every message twice more
// (its request type goes through a map and re-encodes the params), which
// was a fifth of the CPU of a busy session, and a server that matches its
// own responses (the session does) needs nothing else from it.
//
// Back-pressure: the stream counts the requests the read loop has taken
// whose responses are not written yet, and the read loop reads no further
// line while max_in_flight+pendingMargin are owed
// (framing.Options.MaxPending); once paused it waits until at most
// max_in_flight+pendingMargin/2 are owed (ResumeAt), so reads and writes
// resume in runs, not one per answer. A client that stops reading stdout
// fills the pipe, writes block, answers stop being written, and soon
// troupe stops reading stdin: the pipe to troupe fills and the client's
// own writes block. Every request read is still answered once the client
// reads. Memory stays bounded: at most that many requests (plus the
// members of one batch line) and their answers wait in the session's
// mailbox and the stream's buffer; a call's notifications are bounded by
// its reporter's flow (maxUnwrittenBytes); and the stream's write buffer
// is written out whenever it holds flushBytes.
//
// The margin keeps a client that does read from waiting on it: only calls
// in flight (at most max_in_flight) hold their slot for long, every other
// request is answered at once, so the margin is free for what the client
// sends while calls run (notifications/cancelled and answers to
// elicitations take no slot; pings take one briefly). Nothing can
// deadlock on the pause: it needs that many answers unwritten, which
// happens only while the client does not read; once it reads, writes
// finish, slots free and reading resumes, at the latest when only the
// calls in flight are owed (ResumeAt lies above max_in_flight), so a call
// waiting for the client's answer never holds the reader back. (A
// 2025-03-26 batch holds its answers until all are in, but that revision
// has no elicitation.) Cancelled calls free their slot through
// unanswered; when the output closes (the session stops) a paused read
// loop ends.
type Transport struct {
	in   io.Reader
	out  io.WriteCloser
	done chan struct{} // closed when the session has stopped
	opts Options
	log  *slog.Logger

	stream   *framing.Stream
	root     *actor.RootContext
	self     *actor.PID
	flushing bool     // a flushOutput is on its way
	written  []func() // Outbound.Written callbacks of the queued messages
}

// Options configure a Transport.
type Options struct {
	// MaxLineBytes bounds one message (framing.Options.MaxLineBytes).
	MaxLineBytes int
	// Logger receives the transport's debug lines; nil discards them.
	Logger *slog.Logger
	// Read reads a request at the edge (the session's method table:
	// actors' ReadRequest), on the read loop's goroutine; statelessHint is
	// always false here (stdio has no headers). nil reads no params.
	Read func(msg *jsonrpc2.Request, statelessHint bool) *transport.Request
}

// New makes the transport of a client that reads out and writes in; done
// is closed when its session has stopped.
func New(in io.Reader, out io.WriteCloser, done chan struct{}, o Options) *Transport {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Read == nil {
		o.Read = func(msg *jsonrpc2.Request, _ bool) *transport.Request { return transport.NewRequest(msg) }
	}
	return &Transport{in: in, out: out, done: done, opts: o, log: o.Logger}
}

// flushOutput makes the session write the messages it queued.
type flushOutput struct{ transport.Quiet }

// inputClosed is sent by the read loop when the input ends.
type inputClosed struct{ transport.Quiet }

// pendingMargin is how many requests beyond limits.max_in_flight a client
// may have sent whose answers are not written yet before troupe stops
// reading its input (see Transport).
const pendingMargin = 256

// flushBytes is how much the stream may hold for the next write before the
// session writes it without waiting for its flushOutput: a long run of
// queued answers goes out in pieces instead of one buffer the size of all.
const flushBytes = 256 << 10

// Start implements transport.Transport: it starts the read loop.
func (o *Transport) Start(ctx actor.Context, s transport.Session) {
	o.root, o.self = ctx.ActorSystem().Root, ctx.Self()
	o.stream = framing.New(o.in, o.out, framing.Options{MaxLineBytes: o.opts.MaxLineBytes, Logger: o.log,
		MaxPending: s.MaxInFlight() + pendingMargin, ResumeAt: s.MaxInFlight() + pendingMargin/2})
	root, self, stream, read := o.root, o.self, o.stream, o.opts.Read
	// The read loop reads each request (its one decode) and forwards it,
	// so it never waits on the session and
	// wire order is kept (a cancellation arrives after its call). It waits
	// only in ReadMessage, while the client is owed too much (see
	// Transport). It ends when the input does, or when the output has
	// closed while it waited.
	go func() {
		for {
			m, err := stream.ReadMessage()
			if err != nil {
				root.Send(self, &inputClosed{})
				return
			}
			if m.Request != nil {
				root.Send(self, &transport.Inbound{Request: read(m.Request, false)})
			} else {
				root.Send(self, &transport.InboundResponse{Response: m.Response})
			}
		}
	}()
}

// Send implements transport.Transport: it queues a message, written with
// the others the mailbox holds: the flushOutput sent behind the first
// comes out after them, so a busy session writes many messages per
// syscall and an idle one at once.
func (o *Transport) Send(out *transport.Outbound) {
	if err := o.stream.Queue(out.Message); err != nil {
		o.log.Debug("write failed", "err", err)
	}
	if out.Written != nil {
		o.written = append(o.written, out.Written)
	}
	if o.stream.Buffered() >= flushBytes {
		o.writeQueued() // a flushOutput on its way finds less, or nothing
		return
	}
	if !o.flushing {
		o.flushing = true
		o.root.Send(o.self, flushOutput{})
	}
}

// writeQueued writes the queued messages and then tells their senders.
func (o *Transport) writeQueued() {
	if err := o.stream.Flush(); err != nil {
		o.log.Debug("write failed", "err", err)
	}
	for i, f := range o.written {
		f()
		o.written[i] = nil
	}
	o.written = o.written[:0]
}

// Unanswered implements transport.Transport: the stream's count of owed
// answers (and a batch waiting for it) lets go of id.
func (o *Transport) Unanswered(id jsonrpc2.ID) { o.stream.Skip(id) }

// Negotiated implements transport.Transport: batches exist in 2025-03-26
// only.
func (o *Transport) Negotiated(v protocol.Version) { o.stream.SetBatches(v.AllowsBatches()) }

// Receive implements transport.Transport: the flush it asked for, and the
// end of the input.
func (o *Transport) Receive(ctx actor.Context, s transport.Session, msg any) bool {
	switch msg.(type) {
	case flushOutput:
		o.flushing = false
		o.writeQueued()
	case *inputClosed:
		o.log.Debug("input closed")
		s.InputEnded(ctx)
	default:
		return false
	}
	return true
}

// Stopping implements transport.Transport: it writes what is queued and
// closes the output, which also ends a read loop paused on back-pressure.
func (o *Transport) Stopping() {
	o.flushing = false
	o.writeQueued()
	if err := o.stream.CloseWrite(); err != nil {
		o.log.Debug("closing output", "err", err)
	}
}

// Stopped implements transport.Transport: whoever waits for the client's
// end hears of it.
func (o *Transport) Stopped() { close(o.done) }

// Touch implements transport.Transport; stdio sessions do not expire.
func (o *Transport) Touch() {}
