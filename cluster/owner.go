package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/cluster/wire"
)

// window is how many parts an owner sends ahead of the front's
// acknowledgements; ackEvery is how often the front acknowledges.
const (
	window   = 64
	ackEvery = 8
	// partBytes is the size at which the owner's writer sends what it has
	// without waiting for a flush.
	partBytes = 32 << 10
)

// ownerRequest is the actor that serves one forwarded request on the
// owner: it runs the node's handler on a tunnelWriter in a goroutine it
// owns, and stops it when the front cancels (its client left), the front's
// node is lost, or the actor is stopped.
//
// Receives: *wire.Ack (from the front, through the tunnel actor), and its
// own lifecycle. Sends: *wire.Part to the front's stream actor.
type ownerRequest struct {
	fwd     *wire.Forward
	front   *actor.PID
	handler http.Handler
	log     *slog.Logger

	cancel context.CancelFunc
	writer *tunnelWriter
}

// Receive implements actor.Actor.
func (o *ownerRequest) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.start(ctx)
	case *wire.Ack:
		o.writer.acked(m.GetSeq())
	case *actor.Stopping:
		if o.cancel != nil {
			o.cancel()
		}
	}
}

func (o *ownerRequest) start(ctx actor.Context) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	rctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	o.writer = newTunnelWriter(rctx, func(p *wire.Part) { root.Send(o.front, p) })
	req, err := requestOf(rctx, o.fwd)
	go func() {
		defer root.Stop(self)
		defer cancel()
		if err != nil {
			o.log.Warn("cluster: a forwarded request is malformed", "err", err)
			http.Error(o.writer, "malformed forwarded request", http.StatusBadRequest)
		} else {
			o.serve(req)
		}
		o.writer.finish()
	}()
}

// serve runs the handler; a panic in it ends this request only (the
// handler's own recovery is the session's; this is the tunnel's).
func (o *ownerRequest) serve(req *http.Request) {
	defer func() {
		if r := recover(); r != nil {
			o.log.Error("cluster: the handler of a forwarded request panicked", "panic", r)
			if !o.writer.headSent && o.writer.status == 0 {
				http.Error(o.writer, "internal error", http.StatusInternalServerError)
			}
		}
	}()
	o.handler.ServeHTTP(o.writer, req)
}

// requestOf rebuilds the front's request on the owner.
func requestOf(ctx context.Context, f *wire.Forward) (*http.Request, error) {
	switch f.GetMethod() {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		return nil, errors.New("method " + f.GetMethod() + " is not forwarded")
	}
	req, err := http.NewRequestWithContext(ctx, f.GetMethod(), f.GetTarget(), bytes.NewReader(f.GetBody()))
	if err != nil {
		return nil, err
	}
	for _, h := range f.GetHeaders() {
		for _, v := range h.GetValues() {
			req.Header.Add(h.GetName(), v)
		}
	}
	req.Host = f.GetHost()
	req.RemoteAddr = f.GetRemoteAddr()
	req.RequestURI = f.GetTarget()
	return req, nil
}

// tunnelWriter is the http.ResponseWriter of a forwarded request: what the
// handler writes is sent to the front as Parts at each flush (and when a
// part grows large), at most window parts ahead of the front's
// acknowledgements. It implements what http.ResponseController uses
// (FlushError, SetWriteDeadline), so the handler's streaming code runs
// unchanged.
type tunnelWriter struct {
	ctx  context.Context
	send func(*wire.Part)

	header   http.Header
	status   int
	headSent bool
	buf      bytes.Buffer
	seq      uint64

	mu       sync.Mutex
	ack      uint64
	wake     chan struct{} // signalled on each ack
	deadline time.Time
}

func newTunnelWriter(ctx context.Context, send func(*wire.Part)) *tunnelWriter {
	return &tunnelWriter{ctx: ctx, send: send, header: http.Header{}, wake: make(chan struct{}, 1)}
}

// Header implements http.ResponseWriter.
func (w *tunnelWriter) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter.
func (w *tunnelWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// Write implements http.ResponseWriter.
func (w *tunnelWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	w.buf.Write(p)
	if w.buf.Len() >= partBytes {
		if err := w.FlushError(); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// Flush implements http.Flusher.
func (w *tunnelWriter) Flush() { _ = w.FlushError() }

// FlushError sends what was written since the last flush as one part,
// after waiting for room in the window.
func (w *tunnelWriter) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.wait(); err != nil {
		return err
	}
	w.sendPart(false)
	return nil
}

// SetWriteDeadline bounds the wait for room in the window, as a
// connection's write deadline bounds a write to a slow client.
func (w *tunnelWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	w.deadline = t
	w.mu.Unlock()
	return nil
}

// finish sends the last part (and the head, when nothing was flushed).
func (w *tunnelWriter) finish() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.ctx.Err() != nil {
		return // the front is gone or gave up: nobody reads the end
	}
	w.sendPart(true)
}

func (w *tunnelWriter) sendPart(end bool) {
	w.seq++
	p := &wire.Part{Seq: w.seq, Data: bytes.Clone(w.buf.Bytes()), End: end}
	w.buf.Reset()
	if !w.headSent {
		w.headSent = true
		p.Status = int32(w.status)
		p.Headers = headersOf(w.header)
	}
	w.send(p)
}

// acked records the front's acknowledgement (from the actor's goroutine).
func (w *tunnelWriter) acked(seq uint64) {
	w.mu.Lock()
	if seq > w.ack {
		w.ack = seq
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// errSlowClient is the error of a write whose deadline passed while the
// window was full: the front's client stopped reading.
var errSlowClient = os.ErrDeadlineExceeded

// wait blocks while window parts are unacknowledged.
func (w *tunnelWriter) wait() error {
	for {
		w.mu.Lock()
		ahead, deadline := w.seq-w.ack, w.deadline
		w.mu.Unlock()
		if ahead < window {
			return nil
		}
		if err := w.sleep(deadline); err != nil {
			return err
		}
	}
}

// sleep waits for an acknowledgement, the end of the request, or the
// deadline (zero: none).
func (w *tunnelWriter) sleep(deadline time.Time) error {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return errSlowClient
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-w.wake:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	case <-timeout:
		return errSlowClient
	}
}

// headersOf copies an http.Header into wire headers.
func headersOf(h http.Header) []*wire.Header {
	out := make([]*wire.Header, 0, len(h))
	for name, values := range h {
		out = append(out, &wire.Header{Name: name, Values: values})
	}
	return out
}
