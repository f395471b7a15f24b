package actors

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
)

// maxUnwrittenBytes bounds, per call, the notifications a tool has sent
// that the client has not taken yet (written to stdout, or read from the
// call's SSE stream). A streaming tool waits in Reporter.Ready once it is
// reached, and so stops reading its program's pipes: a slow client slows
// the program instead of growing the server's memory.
const maxUnwrittenBytes = 1 << 20

// noticeOverhead is what a notification costs beyond its text, roughly:
// the JSON-RPC envelope and the actor messages that carry it.
const noticeOverhead = 256

// toolNotice is progress or a log message from a running tool, sent to the
// session, which knows the progress token and the client's log level.
type toolNotice struct {
	quiet
	id    jsonrpc2.ID
	tool  string
	isLog bool
	// progress
	done, total float64
	message     string
	// log (and custom notifications: method set, data the params)
	level  protocol.LoggingLevel
	data   any
	method string
	// written must be called once the notice is written to the client or
	// dropped; it returns the notice's bytes to the call's flow.
	written func()
	// paced marks notices of a tool that waits in Reporter.Ready: the
	// client's own pace limits them, so the session's log rate limit
	// (meant for tools that log without looking) does not drop them.
	paced bool
}

// reporter implements tools.Reporter by messaging the session. Progress
// and Log never block; Ready does, while the call's flow is full.
type reporter struct {
	root    *actor.RootContext
	session *actor.PID
	id      jsonrpc2.ID
	tool    string
	flow    flow
	paced   atomic.Bool // the tool has called Ready: it follows the client's pace
	// view and observer, when the Host has an Observer: the first Ready
	// (a tool streaming its output) changes the call's state.
	view     *CallView
	observer Observer
}

func newReporter(root *actor.RootContext, session *actor.PID, id jsonrpc2.ID, tool string) *reporter {
	return &reporter{root: root, session: session, id: id, tool: tool}
}

// Progress implements tools.Reporter.
func (r *reporter) Progress(done, total float64, message string) {
	n := noticeOverhead + len(message)
	r.flow.add(n)
	r.root.Send(r.session, &toolNotice{id: r.id, tool: r.tool, done: done, total: total, message: message,
		written: func() { r.flow.release(n) }})
}

// Log implements tools.Reporter.
func (r *reporter) Log(level protocol.LoggingLevel, data any) {
	n := noticeOverhead + approxSize(data)
	r.flow.add(n)
	r.root.Send(r.session, &toolNotice{id: r.id, tool: r.tool, isLog: true, level: level, data: data,
		written: func() { r.flow.release(n) }, paced: r.paced.Load()})
}

// Notify implements tools.Notifier.
func (r *reporter) Notify(method string, params map[string]any) {
	n := noticeOverhead + approxSize(params)
	r.flow.add(n)
	r.root.Send(r.session, &toolNotice{id: r.id, tool: r.tool, method: method, data: params,
		written: func() { r.flow.release(n) }, paced: r.paced.Load()})
}

// Ready implements tools.Reporter.
func (r *reporter) Ready(ctx context.Context) error {
	if !r.paced.Swap(true) && r.observer != nil {
		r.observer.CallStateChanged(r.view, CallStreaming)
	}
	return r.flow.wait(ctx, maxUnwrittenBytes)
}

// flow counts a call's notification bytes between the tool and the
// client. The zero value is ready to use.
type flow struct {
	mu      sync.Mutex
	pending int
	wake    chan struct{} // made on first wait; signalled by release
}

func (f *flow) add(n int) {
	f.mu.Lock()
	f.pending += n
	f.mu.Unlock()
}

func (f *flow) release(n int) {
	f.mu.Lock()
	f.pending -= n
	wake := f.wake
	f.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// wait returns once pending is at most limit, or ctx is done.
func (f *flow) wait(ctx context.Context, limit int) error {
	for {
		f.mu.Lock()
		if f.pending <= limit {
			f.mu.Unlock()
			return nil
		}
		if f.wake == nil {
			f.wake = make(chan struct{}, 1)
		}
		wake := f.wake
		f.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// approxSize is about how many bytes data takes on the wire: the strings
// it holds (which is where a tool's output is), and a little for the rest.
func approxSize(data any) int {
	switch v := data.(type) {
	case string:
		return len(v)
	case map[string]any:
		n := 0
		for k, e := range v {
			n += len(k) + 4 + approxSize(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += 1 + approxSize(e)
		}
		return n
	case []string:
		n := 0
		for _, e := range v {
			n += 3 + len(e)
		}
		return n
	}
	return 16
}
