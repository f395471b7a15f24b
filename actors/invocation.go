package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/audit"
	"troupe/gate"
	"troupe/identity"
	"troupe/overrides"
	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
)

// Excerpts of a stopped run's output that a deadline error quotes: with
// their notes (where the whole streams are), under the 12,000 bytes Codex
// keeps of a result.
const (
	stdoutExcerptBytes = 4 << 10
	stderrExcerptBytes = 2 << 10
)

// invocation is one tools/call: it finds the tool, validates the
// arguments, passes the approval gate (asking through its asker when a
// person must decide), runs the tool in a goroutine it owns under
// the call's deadline, and turns whatever happens into exactly one result
// for its session, plus one audit record. It is the state and logic of one
// call; the actor that runs it is an invoker (invoker.go), which a session
// reuses for its next call.
type invocation struct {
	id        jsonrpc2.ID
	tool      string
	args      json.RawMessage
	meta      json.RawMessage // the _meta of the client's tools/call (nil: none)
	registry  *tools.Registry
	timeout   time.Duration // the server's default call timeout
	requested time.Duration // the client's own deadline (0: none)
	progress  bool          // the client asked for progress (sent a progress token)
	log       *slog.Logger  // the session's; see logger
	callLog   *slog.Logger  // log with the call's attributes, made on first use
	exec      *hostDeps
	call      callContext

	cid     string // correlation id of this call, in every log line about it
	started time.Time
	asked   time.Time // when a person was asked to approve (zero: nobody was)
	// view is the call as the Host's Observer sees it, and observed the
	// context it gave the call (the tool's parent); nil without one.
	view     *CallView
	observed context.Context
	entry    *tools.Entry
	req      *tools.Request
	preview  *tools.Preview
	hash     string
	decision string        // one of the approval outcomes
	limit    time.Duration // the effective deadline, once running
	ran      time.Time     // when the tool started
	timer    *time.Timer
	done     bool
	// gen tells this call's messages (the tool's return, its deadline)
	// from those of an earlier call of the same invoker.
	gen uint64
	// cancel ends the tool's context: its programs are killed.
	cancel context.CancelFunc
	// phase is taken from phaseRunning to phaseOver once, by whichever
	// ends a running call first: its tool's goroutine (which then answers
	// the call itself), the deadline or a stop (the invoker). Before the
	// run it is zero and only the invoker touches the call.
	phase atomic.Int32
	// running marks a call answered while its tool still unwinds (a
	// deadline): its invoker is not reused.
	running bool
	// root, self and session send the call's answer from wherever it is
	// made: the invoker, or the tool's goroutine.
	root          *actor.RootContext
	self, session *actor.PID
	// claimed is taken once, by whichever comes first: the invoker as it
	// starts the call, or the session as it cancels or ends a call whose
	// startCall its invoker has not taken yet (a stop overtakes the
	// queued startCall). The loser leaves the call alone, so a call is
	// started, or recorded as cancelled unstarted, exactly once.
	claimed atomic.Bool
}

// unstarted records a call that was cancelled (or whose session ended)
// before its invoker took it: nothing ran, and the log and the audit log
// say so. The session calls it after winning claimed.
func (inv *invocation) unstarted() {
	inv.cid, inv.started, inv.done = NewCorrelationID(), time.Now(), true
	inv.logAt(slog.LevelInfo, "call cancelled before it started", "outcome", tools.KindCancelled)
	inv.audit(string(tools.KindCancelled))
}

// callContext is what the session knows that a call's gate and run need.
type callContext struct {
	session string // session id, for logs and audit records
	// who called: what the audit record, the log lines, the trace and the
	// status page name (String). nil: stdio's local user.
	who     *identity.Identity
	trusted *[32]byte // the fingerprint of the tool a person trusted for the session, if any
	version protocol.Version
	gate    gate.Policy
	store   *spool.Store // the session's spooled outputs; nil keeps output in memory only
	// node is the cluster member the output's id names (a 2026-07-28 HTTP
	// call on a cluster node: its links are read through any node); "":
	// the call's id alone.
	node    string
	auditor *audit.Writer // nil: no audit log
	// overrides are the cwd and env the session set for itself (nil:
	// none); they reach the tool, the prompt and the audit record.
	overrides *tools.Overrides
	// asker puts the call's questions to a person, as its era allows:
	// over the session (handshake era) or in rounds (stateless era).
	asker asker
	// release gives back the identity's concurrency slot the call holds
	// (SessionOptions.Limits); run once, as the call's record is made.
	release func()
}

// The phases of a call's run (invocation.phase).
const (
	phaseRunning int32 = iota + 1 // the tool runs
	phaseOver                     // one of the tool's goroutine, the deadline, a stop ended it
)

// deadlineExpired fires when a call has run for its timeout.
type deadlineExpired struct {
	quiet
	gen uint64
}

// trustGranted tells the session a person trusted tool for the rest of
// the session, as long as it stays the tool they saw (fingerprint).
type trustGranted struct {
	tool        string
	fingerprint [32]byte
}

// receive handles the messages of the call its invoker runs. Messages of
// an earlier call of the same invoker (a late deadline) carry another gen
// and are dropped.
func (inv *invocation) receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *approvalDecided:
		inv.approvalDecided(ctx, msg)
	case *deadlineExpired:
		if msg.gen == inv.gen {
			inv.deadline(ctx)
		}
	}
}

// stopping ends the call when its invoker stops: the client cancelled it,
// the session ended, or the call is over but its tool still unwinds.
func (inv *invocation) stopping(ctx actor.Context) {
	if inv.cancel != nil {
		inv.cancel()
	}
	if inv.timer != nil {
		inv.timer.Stop()
	}
	if inv.phase.Load() != 0 && !inv.phase.CompareAndSwap(phaseRunning, phaseOver) {
		return // the run's end was taken already: by its goroutine or the deadline, which answer and record it
	}
	if !inv.done {
		// The session stopped the call: the client cancelled it, or the
		// session ended. No response goes out (the spec says so for
		// cancellation); the log and the audit log say what happened.
		inv.done = true
		inv.logAt(slog.LevelInfo, "call cancelled", "outcome", tools.KindCancelled, "duration", time.Since(inv.started))
		inv.audit(string(tools.KindCancelled))
	}
}

func (inv *invocation) start(ctx actor.Context) {
	inv.root, inv.self, inv.session = ctx.ActorSystem().Root, ctx.Self(), ctx.Parent()
	inv.cid = NewCorrelationID()
	inv.started = time.Now()
	inv.view, inv.observed, inv.asked = nil, nil, time.Time{}
	if o := inv.exec.observer; o != nil {
		inv.view = &CallView{ID: inv.cid, Session: inv.call.session, Identity: whoString(inv.call.who), Tool: inv.tool, Version: string(inv.call.version),
			Started: inv.started, Meta: inv.meta}
		inv.observed = o.CallStarted(context.Background(), inv.view)
	}
	entry, ok := inv.registry.Lookup(inv.tool)
	if !ok {
		if held, ok := inv.registry.Held(inv.tool); ok {
			// A downstream tool that changed since it was trusted: the
			// model reads why it cannot run, and the record says held.
			inv.fail(&tools.Error{Kind: tools.KindHeld, Message: held})
			return
		}
		inv.fail(&tools.Error{Kind: tools.KindNotFound,
			Message: "unknown tool " + quote(inv.tool) + "; call tools/list for the available tools"})
		return
	}
	inv.entry = entry
	checked, err := entry.Check(inv.args) // one parse: the text for the tool, the value for the hash
	if err != nil {
		te, _ := tools.AsError(err)
		inv.fail(te)
		return
	}
	args := checked.Raw
	root := inv.root
	inv.req = &tools.Request{Arguments: args, Secrets: inv.exec.secrets.Load(), WantsProgress: inv.progress, ClientMeta: inv.meta,
		Reporter:  newReporter(root, ctx.Parent(), inv.id, inv.tool),
		Overrides: inv.call.overrides, Rounds: inv.call.asker.rounds(), Relayed: &tools.Relayed{}}
	if !inv.req.Rounds {
		p := &peer{root: root, session: ctx.Parent(), sessionID: inv.call.session, related: &inv.id}
		inv.req.Client, inv.req.Session = p, p
	} else {
		// A call whose questions go in rounds (the stateless era) has no
		// session to name or notify later.
		inv.req.Client = &peer{root: root, session: ctx.Parent(), related: &inv.id}
	}
	inv.req.RequestID = inv.rawID()
	inv.req.Identity = inv.call.who
	if inv.view != nil {
		r := inv.req.Reporter.(*reporter)
		r.view, r.observer = inv.view, inv.exec.observer
	}
	if p, ok := tools.Implements[tools.Previewer](entry.Tool); ok {
		if inv.preview, err = p.Preview(inv.req); err != nil {
			inv.toolFailed(err)
			return
		}
	}
	spec := entry.Spec()
	inv.hash = gate.Hash(gate.Call{Spec: spec, Arguments: args, Decoded: checked.Value, Preview: inv.preview, Session: inv.call.overrides})
	// A request that answers an earlier question (a round's retry) is
	// its asker's: the gate passed, or is decided, there.
	if inv.call.asker.resume(inv, ctx, spec, args) {
		return
	}
	switch {
	case !spec.Safety.NeedsApproval():
		inv.decision = approvalNotRequired
	case sessionMayTrust(spec) && inv.call.trusted != nil && *inv.call.trusted == entry.Fingerprint(), inv.call.gate.Trusts(spec):
		inv.decision = approvalTrusted
	default:
		// A person must decide: the asker asks, in the call's era, and the
		// decision comes back as an approvalDecided (or the asker answered
		// the call itself).
		inv.call.asker.ask(inv, ctx, spec, args)
		return
	}
	inv.decided(inv.decision, "")
	inv.run(ctx)
}

func (inv *invocation) approvalDecided(ctx actor.Context, d *approvalDecided) {
	if inv.done {
		return
	}
	refused := gate.Refused{Ending: d.ending, Waited: d.waited, Detail: d.detail}
	detail := d.detail
	if d.outcome != approvalApproved && refused.Unseen() {
		detail += " by the client itself, " + d.waited.String() + " after the request (nobody read it)"
	}
	inv.decided(d.outcome, detail)
	if d.outcome != approvalApproved {
		inv.fail(gate.Refusal(inv.entry.Spec(), refused, inv.call.gate))
		return
	}
	if d.session && sessionMayTrust(inv.entry.Spec()) {
		ctx.Send(ctx.Parent(), &trustGranted{tool: inv.tool, fingerprint: inv.entry.Fingerprint()})
	}
	inv.run(ctx)
}

// decided records and logs the gate's decision: every decision is in the
// log with the session, tool, arguments hash and correlation id.
func (inv *invocation) decided(outcome, detail string) {
	inv.decision = outcome
	if o := inv.exec.observer; o != nil && outcome != approvalNotRequired {
		var waited time.Duration
		if !inv.asked.IsZero() {
			waited = time.Since(inv.asked)
		}
		o.ApprovalDecided(inv.view, outcome, waited)
	}
	level := slog.LevelInfo
	if outcome == approvalNotRequired {
		level = slog.LevelDebug // no question was asked; the audit record has it
	}
	if inv.enabled(level) { // checked first: building the arguments allocates, and most calls log nothing here
		inv.logAt(level, "approval decision", "args_hash", inv.hash, "outcome", outcome, "detail", detail)
	}
}

// run starts the tool's goroutine under the call's effective deadline: the
// client's, when it asked for one, but never longer than the tool's
// ceiling (or the server's default).
func (inv *invocation) run(ctx actor.Context) {
	inv.limit = inv.timeout
	if t := inv.entry.Spec().Safety.Timeout; t > 0 {
		inv.limit = t
	}
	if inv.requested > 0 && inv.requested < inv.limit {
		inv.limit = inv.requested
	}
	if inv.preview != nil && inv.preview.Timeout > 0 && inv.preview.Timeout < inv.limit {
		inv.limit = inv.preview.Timeout
	}
	if inv.preview != nil {
		// Only tools that run programs (Previewers) have output to spool.
		out, err := inv.newOutput()
		if err != nil {
			inv.logAt(slog.LevelError, "creating the output spool", "err", err)
			out = spool.NewOutput(spool.Limits{})
		}
		inv.req.Output = out
	}
	req, tool := inv.req, inv.entry.Tool
	self, root, gen := ctx.Self(), ctx.ActorSystem().Root, inv.gen
	parent := context.Background()
	if inv.observed != nil {
		parent = inv.observed
		inv.exec.observer.CallStateChanged(inv.view, CallRunning)
	}
	runCtx, cancel := context.WithCancel(parent)
	inv.cancel = cancel
	inv.phase.Store(phaseRunning)
	inv.ran = time.Now()
	inv.timer = time.AfterFunc(inv.limit, func() { root.Send(self, &deadlineExpired{gen: gen}) })
	if inv.enabled(slog.LevelDebug) {
		inv.logAt(slog.LevelDebug, "call started", "timeout", inv.limit)
	}
	deps := inv.exec
	deps.running.Add(1)
	// The tool runs on a pool worker, whose stack has already grown, like
	// a mailbox does; a tool that blocks holds its worker and the pool
	// starts another for the next one (see workerPool). Cancelling its
	// context (a cancelled call, a deadline, the session's end) is how the
	// end of a call reaches the tool and kills its programs.
	deps.pool.Schedule(func() {
		defer deps.running.Done()
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				if req.Output != nil {
					req.Output.Close()
				}
				if inv.phase.CompareAndSwap(phaseRunning, phaseOver) {
					inv.logAt(slog.LevelError, "tool panicked", "panic", r, "stack", string(debug.Stack()))
					inv.fail(&tools.Error{Kind: tools.KindInternal, Message: "internal error in " + inv.tool})
				}
			}
		}()
		res, err := tool.Call(runCtx, req)
		if req.Output != nil {
			req.Output.Close() // its last bytes are in before the answer reads it
		}
		// The goroutine answers the call itself, unless the invoker did
		// first (the deadline) or stopped it (a cancel): one hop less
		// than reporting back to the invoker.
		if inv.phase.CompareAndSwap(phaseRunning, phaseOver) {
			inv.toolReturned(res, err)
		}
	})
}

func (inv *invocation) newOutput() (*spool.Output, error) {
	if inv.call.store == nil {
		return spool.NewOutput(spool.Limits{}), nil
	}
	return inv.call.store.Create(spool.NodeOutputID(inv.call.node, inv.cid))
}

// deadline cancels the tool — which kills the call's processes — and
// answers with what the call wrote so far.
func (inv *invocation) deadline(ctx actor.Context) {
	if !inv.phase.CompareAndSwap(phaseRunning, phaseOver) {
		return // the tool's goroutine answered first
	}
	inv.running = true // its tool still unwinds: the invoker is not reused
	inv.cancel()
	msg := fmt.Sprintf("%s did not finish within %s and was stopped.", inv.tool, inv.limit)
	res := (&tools.Error{Kind: tools.KindDeadlineExceeded, Message: msg + excerpts(inv.req.Output)}).Result(inv.cid)
	if s, ok := tools.Implements[tools.Stopper](inv.entry.Tool); ok {
		res.StructuredContent = s.Stopped(inv.req.Output, time.Since(inv.ran))
	}
	inv.answer(res, string(tools.KindDeadlineExceeded))
}

// toolReturned answers the call with what its tool returned.
func (inv *invocation) toolReturned(result *protocol.CallToolResult, err error) {
	var input *tools.InputRequired
	if errors.As(err, &input) && inv.call.asker.toolAsks(inv, input) {
		return // its asker answered: the tool's question goes out in a round
	}
	switch {
	case err != nil:
		inv.toolFailed(err)
	case result == nil:
		inv.logAt(slog.LevelError, "tool returned neither result nor error")
		inv.fail(&tools.Error{Kind: tools.KindInternal, Message: inv.tool + " returned no result"})
	default:
		inv.answer(result, "ok")
	}
}

// toolFailed answers with a tool's error: its own *tools.Error as is; any
// other error as an internal failure whose detail (which may hold host
// paths) stays in the log.
func (inv *invocation) toolFailed(err error) {
	if te, ok := tools.AsError(err); ok {
		inv.fail(te)
		return
	}
	inv.logAt(slog.LevelError, "tool failed", "err", err)
	inv.fail(&tools.Error{Kind: tools.KindInternal, Message: inv.tool + " failed; see the server log"})
}

// fail answers the call with e. The outcome that logs, the audit record
// and the metrics carry is e's kind, the word the result itself names
// ("kind: not_found"), so that operators and clients read one vocabulary
// (issue 24); how an approval ended is the record's approval field and
// troupe_approvals_total's outcome.
func (inv *invocation) fail(e *tools.Error) {
	inv.answer(e.Result(inv.cid), string(e.Kind))
}

// answerRPCError ends the call with a JSON-RPC error instead of a
// CallToolResult (a round's refusals), logged and audited with outcome.
func (inv *invocation) answerRPCError(e *jsonrpc2.Error, outcome string) {
	inv.answerWithout(&callFinished{id: inv.id, from: inv.self, refused: e}, outcome)
}

// answerWithout ends the call with fin, an answer that is not a
// CallToolResult, logged and audited as every call is.
func (inv *invocation) answerWithout(fin *callFinished, outcome string) {
	if inv.done {
		return
	}
	inv.done = true
	inv.logAt(slog.LevelInfo, "call finished", "outcome", outcome, "duration", time.Since(inv.started))
	inv.audit(outcome)
	inv.finished(fin)
}

// answer sends the call's one result (and its audit record) to the
// session, from the invoker or the tool's goroutine, whichever ends the
// call. Output that did not fit the result is offered as resource links.
func (inv *invocation) answer(result *protocol.CallToolResult, outcome string) {
	if inv.done {
		return
	}
	inv.done = true
	if result.Content == nil {
		result.Content = []protocol.Content{}
	}
	if out := inv.output(); out != nil {
		result.Content = append(result.Content, links(out)...)
	}
	// A call that worked is a debug line (the audit log has every call;
	// an info line per call is most of a busy server's log volume), one
	// that failed a warning.
	level := slog.LevelDebug
	if result.IsError {
		level = slog.LevelWarn
	}
	if inv.enabled(level) {
		inv.logAt(level, "call finished", "outcome", outcome, "duration", time.Since(inv.started))
	}
	inv.audit(outcome)
	inv.finished(&callFinished{id: inv.id, from: inv.self, result: result})
}

// finished sends the call's one answer to the session. The invoker can
// run another call at once unless this one's tool is still unwinding (a
// deadline): then the session stops it.
func (inv *invocation) finished(msg *callFinished) {
	if inv.timer != nil {
		inv.timer.Stop()
	}
	msg.reusable = !inv.running
	inv.root.Send(inv.session, msg)
}

func (inv *invocation) output() *spool.Output {
	if inv.req == nil {
		return nil
	}
	return inv.req.Output
}

// links are resource_link blocks for each stream the result could not
// show whole.
func links(out *spool.Output) []protocol.Content {
	var cs []protocol.Content
	for _, c := range []*spool.Capture{out.Stdout, out.Stderr} {
		if uri := c.URI(); uri != "" && c.Truncated() {
			cs = append(cs, protocol.ResourceLinkContent(uri, out.ID+"-"+c.Name(),
				c.Describe()+"; read it with resources/read, in ranges with ?offset=N&length=M.", "text/plain", c.Spooled()))
		}
	}
	return cs
}

// excerpts quotes the end of a stopped run's output for an error message.
func excerpts(out *spool.Output) string {
	if out == nil {
		return ""
	}
	var b strings.Builder
	for _, s := range []struct {
		c *spool.Capture
		n int
	}{{out.Stdout, stdoutExcerptBytes}, {out.Stderr, stderrExcerptBytes}} {
		if s.c.Total() == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n\n%s so far (%d bytes):\n%s", s.c.Name(), s.c.Total(), s.c.Last(s.n))
	}
	return b.String()
}

// audit gives the call's record to the audit writer, if there is one.
func (inv *invocation) audit(outcome string) {
	if release := inv.call.release; release != nil {
		// Every call is recorded exactly once, however it ends: its end
		// as its identity's limits see it.
		inv.call.release = nil
		release()
	}
	if inv.call.auditor == nil && inv.exec.observer == nil {
		return
	}
	r := &audit.Record{Event: "call", Session: inv.call.session, Identity: whoString(inv.call.who), Tool: inv.tool, ArgsHash: inv.hash,
		TimeoutMs: inv.limit.Milliseconds(), Approval: inv.decision, Started: inv.started, Stopped: time.Now(),
		Outcome: outcome, CorrelationID: inv.cid}
	if inv.decision == "" {
		r.Approval = approvalNotRequired
	}
	if inv.entry != nil {
		r.Sandbox = inv.entry.Spec().Safety.SandboxProfile
	}
	if inv.preview != nil {
		r.Cwd = inv.preview.Cwd
	}
	if o := inv.call.overrides; o != nil {
		r.SessionCwd, r.SessionEnv = o.Cwd, overrides.EnvNames(o)
	}
	if out := inv.output(); out != nil {
		r.StdoutBytes, r.StderrBytes = out.Stdout.Total(), out.Stderr.Total()
		r.ExitStatus = out.ExitStatus()
	}
	if inv.req != nil {
		r.Sampling = inv.req.Relayed.Sampling()
	}
	if inv.call.auditor != nil {
		inv.call.auditor.Record(r)
	}
	if o := inv.exec.observer; o != nil {
		o.CallFinished(inv.view, r)
	}
}

// whoString names a caller as records do: the identity's String, "local"
// for stdio's (nil) one. It never holds a credential.
func whoString(who *identity.Identity) string {
	if who == nil {
		return identity.Local.String()
	}
	return who.String()
}

// callerName is who to name in an approval's prompt: a token's or an
// OAuth subject's identity; "" for stdio's one caller and an
// unauthenticated front's anonymous ones, who have no name to show.
func callerName(who *identity.Identity) string {
	if who == nil || (who.Kind != identity.Token && who.Kind != identity.OAuth) {
		return ""
	}
	return who.String()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// enabled reports whether the session's logger takes level: callers on
// every call's path check it before building a line's arguments.
func (inv *invocation) enabled(level slog.Level) bool {
	return inv.log.Enabled(context.Background(), level)
}

// logAt logs with the call's logger, which it makes only when the level
// is enabled.
func (inv *invocation) logAt(level slog.Level, msg string, args ...any) {
	if inv.log.Enabled(context.Background(), level) {
		inv.logger().Log(context.Background(), level, msg, args...)
	}
}

// logger is the call's logger: the session's, with the call's id, tool and
// correlation id. It is made on first use because most calls log nothing
// at the configured level, and attaching attributes costs a handler copy.
func (inv *invocation) logger() *slog.Logger {
	if inv.callLog == nil {
		inv.callLog = inv.log.With("id", inv.id.String(), "tool", inv.tool, "identity", whoString(inv.call.who), "correlation_id", inv.cid)
	}
	return inv.callLog
}

// rawID is the call's request id as the client wrote it in JSON.
func (inv *invocation) rawID() json.RawMessage {
	if inv.id.IsString {
		b, _ := json.Marshal(inv.id.Str)
		return b
	}
	return strconv.AppendUint(nil, inv.id.Num, 10)
}
