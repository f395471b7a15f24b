package downstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"troupe/protocol"
)

// InputRequired is CallTool's error when Observer.Rounds is set and the
// call cannot go on without answers from the caller's client: a modern
// server's input_required result, or a legacy server's elicitation/create
// in the middle of the call (that call stays open on this client, parked,
// until the answer comes with Resume or DefaultParkTimeout passes). The
// caller puts Requests to its client and calls again with Resume.
type InputRequired struct {
	// Requests are the questions by key: {"method": …, "params": …} as
	// the server sent them (a legacy server's elicitation is under the
	// key "elicitation").
	Requests map[string]json.RawMessage
	// State is opaque: it comes back in Resume.State. It holds a modern
	// server's requestState, which the server protects, or the name of
	// a parked call; the caller must keep it from being forged (troupe
	// seals it).
	State string
}

// Error implements error.
func (e *InputRequired) Error() string {
	return fmt.Sprintf("upstream: the call needs %d answer(s) from the client", len(e.Requests))
}

// Resume continues a call that ended with *InputRequired: the client's
// answers by key, and the State it carried.
type Resume struct {
	Responses map[string]json.RawMessage
	State     string
}

// roundState is InputRequired.State: the server's own requestState, or
// the id of a parked call.
type roundState struct {
	Server    string `json:"s,omitempty"`
	HasServer bool   `json:"hs,omitempty"`
	Park      string `json:"p,omitempty"`
}

func (s roundState) encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Bounds of the rounds.
const (
	// maxRounds bounds the input_required rounds one CallTool answers
	// itself (for a caller without Rounds) against a server that never
	// stops asking.
	maxRounds = 16
	// maxParked bounds the calls parked on one client.
	maxParked = 256
	// DefaultParkTimeout is how long a parked call waits for its answer
	// when Config.ParkTimeout is zero.
	DefaultParkTimeout = 10 * time.Minute
	// legacyQuestionKey names a legacy server's elicitation in
	// InputRequired.Requests; legacySamplingKey its sampling request.
	legacyQuestionKey = "elicitation"
	legacySamplingKey = "sampling"
)

// inputRequired is a modern server's InputRequiredResult.
type inputRequired struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  *string                    `json:"requestState"`
}

// asInputRequired decodes res when it is an input_required result.
func asInputRequired(res json.RawMessage) (*inputRequired, bool) {
	var ir inputRequired
	if json.Unmarshal(res, &ir) != nil || ir.ResultType != "input_required" {
		return nil, false
	}
	return &ir, true
}

// callRounds calls a tool and handles a modern server's input_required
// results: returned as *InputRequired when obs.Rounds is set, else
// answered here (elicitation through obs.Elicit) and retried, at most
// maxRounds times. round is the client's answers to an earlier round.
func (c *Client) callRounds(ctx context.Context, name string, args json.RawMessage, obs Observer, round *Resume, server *roundState) (json.RawMessage, error) {
	for i := 0; ; i++ {
		res, err := c.callOnce(ctx, name, args, obs, round, server)
		if err != nil {
			return nil, err
		}
		ir, ok := asInputRequired(res)
		if !ok || c.era != protocol.EraStateless {
			return res, nil
		}
		if ir.InputRequests == nil && ir.RequestState == nil {
			return nil, fmt.Errorf("upstream %q: tools/call %s: input_required without inputRequests or requestState", c.name, name)
		}
		next := roundState{}
		if ir.RequestState != nil {
			next.Server, next.HasServer = *ir.RequestState, true
		}
		if obs.Rounds {
			if err := c.checkAsks(ir.InputRequests); err != nil {
				return nil, fmt.Errorf("upstream %q: tools/call %s: %w", c.name, name, err)
			}
			return nil, &InputRequired{Requests: ir.InputRequests, State: next.encode()}
		}
		if i+1 >= maxRounds {
			return nil, fmt.Errorf("upstream %q: tools/call %s: still asking for input after %d rounds", c.name, name, maxRounds)
		}
		responses, err := c.answerRound(ctx, ir.InputRequests, obs)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: tools/call %s: %w", c.name, name, err)
		}
		round, server = &Resume{Responses: responses}, &next
	}
}

// checkAsks refuses a modern server's inputRequests that troupe did not
// declare before they reach a caller who answers in rounds: sampling
// without Config.Sampling (logged), or a method troupe never answers.
func (c *Client) checkAsks(requests map[string]json.RawMessage) error {
	for key, raw := range requests {
		var r struct {
			Method string `json:"method"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("input request %q is not a request object", key)
		}
		switch {
		case r.Method == methodSampling && !c.sampling:
			c.log.Warn("upstream: sampling request refused: sampling is not enabled for this server (set sampling = true in its [mcp_servers] table to relay it)")
			return fmt.Errorf("input request %q asks for sampling, which is not enabled for this server", key)
		case r.Method == methodSampling:
			c.log.Info("upstream: sampling request relayed to the calling client in an input_required round")
		case r.Method != protocol.MethodElicitationCreate && r.Method != "roots/list":
			return fmt.Errorf("input request %q asks for %s, which troupe did not declare", key, r.Method)
		}
	}
	return nil
}

// answerRound answers a modern server's inputRequests the way a legacy
// server's requests are answered: elicitation through obs.Elicit (declined
// without one), sampling through obs.Sample (see sample), roots/list with
// no roots; troupe declares nothing else.
func (c *Client) answerRound(ctx context.Context, requests map[string]json.RawMessage, obs Observer) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(requests))
	f := &flight{obs: obs, ctx: ctx}
	for key, raw := range requests {
		var r struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("input request %q is not a request object", key)
		}
		switch r.Method {
		case protocol.MethodElicitationCreate:
			res, rpcErr := c.elicit(ctx, r.Params, f)
			if rpcErr != nil {
				res = answerDecline
			}
			out[key] = res
		case methodSampling:
			res, rpcErr := c.sample(ctx, r.Params, f)
			if rpcErr != nil {
				return nil, fmt.Errorf("input request %q: %s", key, rpcErr.Message)
			}
			out[key] = res
		case "roots/list":
			out[key] = answerRoots
		default:
			return nil, fmt.Errorf("input request %q asks for %s, which troupe did not declare", key, r.Method)
		}
	}
	return out, nil
}

// parked is a legacy server's call that asked a question its caller's
// client answers in a later request: the call goes on in a goroutine of
// the client, waiting in the relayed elicitation.
type parked struct {
	questions chan *question // from the call's elicitations
	done      chan struct{}  // closed when the call returned; res and err set
	res       json.RawMessage
	err       error
	cancel    context.CancelFunc

	mu  sync.Mutex
	obs Observer // who hears the call's progress and logs now (none while parked)
}

// question is one elicitation or sampling request of a parked call.
type question struct {
	method string // elicitation/create or sampling/createMessage
	params json.RawMessage
	answer chan json.RawMessage
}

// key names the question in InputRequired.Requests and its answer in
// Resume.Responses.
func (q *question) key() string {
	if q.method == methodSampling {
		return legacySamplingKey
	}
	return legacyQuestionKey
}

// parkedEntry is a parked call waiting for its answer.
type parkedEntry struct {
	p     *parked
	q     *question
	timer *time.Timer
}

func (p *parked) listener() Observer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.obs
}

func (p *parked) setListener(obs Observer) {
	p.mu.Lock()
	p.obs = obs
	p.mu.Unlock()
}

// callParkable runs a call to a legacy server for a caller whose client
// answers in rounds: the call runs in the client's goroutine, and an
// elicitation in the middle of it parks the call and ends this CallTool
// with *InputRequired.
func (c *Client) callParkable(ctx context.Context, name string, args json.RawMessage, obs Observer) (json.RawMessage, error) {
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(c.life, cancel)
	p := &parked{questions: make(chan *question), done: make(chan struct{}), cancel: cancel, obs: obs}
	inner := Observer{
		Progress: func(progress, total float64, message string) {
			if l := p.listener(); l.Progress != nil {
				l.Progress(progress, total, message)
			}
		},
		Log: func(level protocol.LoggingLevel, logger string, data json.RawMessage) {
			if l := p.listener(); l.Log != nil {
				l.Log(level, logger, data)
			}
		},
		Elicit: func(ectx context.Context, params json.RawMessage) (json.RawMessage, error) {
			if urlMode(params) {
				// A URL-mode question lives by its elicitationId and ends
				// with notifications/elicitation/complete, which only the
				// session-based revisions have: a caller that answers in
				// rounds is not offered it.
				c.log.Debug("upstream: URL-mode elicitation declined: the caller answers in rounds (2026-07-28), which has no elicitationId or elicitation/complete")
				return answerDecline, nil
			}
			return p.ask(ectx, protocol.MethodElicitationCreate, params)
		},
	}
	if c.sampling {
		inner.Sample = func(ectx context.Context, params json.RawMessage) (json.RawMessage, error) {
			return p.ask(ectx, methodSampling, params)
		}
	}
	if !c.spawn(func() {
		defer stop()
		defer close(p.done)
		p.res, p.err = c.callOnce(pctx, name, args, inner, nil, nil)
	}) {
		cancel()
		stop()
		return nil, c.closedErr()
	}
	return c.waitParked(ctx, p)
}

// urlMode reports whether elicitation/create params ask in URL mode.
func urlMode(params json.RawMessage) bool {
	var p struct {
		Mode string `json:"mode"`
	}
	return json.Unmarshal(params, &p) == nil && p.Mode == "url"
}

// ask hands a question of the running call to waitParked, which parks the
// call, and waits for the answer a later round brings.
func (p *parked) ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	q := &question{method: method, params: params, answer: make(chan json.RawMessage, 1)}
	select {
	case p.questions <- q:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case a := <-q.answer:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// waitParked waits for a parkable call's next event: its end, or a
// question, which parks it. When ctx ends first the call is cancelled.
func (c *Client) waitParked(ctx context.Context, p *parked) (json.RawMessage, error) {
	select {
	case <-p.done:
		p.cancel()
		return p.res, p.err
	case q := <-p.questions:
		p.setListener(Observer{}) // nobody hears the call while it waits
		return nil, c.park(p, q)
	case <-ctx.Done():
		p.setListener(Observer{})
		p.cancel()
		return nil, context.Cause(ctx)
	}
}

// park files a parked call under a fresh id and returns the
// *InputRequired that names it. A client with maxParked calls waiting
// declines the question instead and the call goes on.
func (c *Client) park(p *parked, q *question) error {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	key := hex.EncodeToString(id)
	c.mu.Lock()
	if len(c.parked) >= maxParked || c.stopping {
		c.mu.Unlock()
		p.cancel()
		return fmt.Errorf("upstream %q: %d calls already wait for their clients' answers", c.name, maxParked)
	}
	e := &parkedEntry{p: p, q: q}
	e.timer = time.AfterFunc(c.parkTimeout, func() {
		if c.unpark(key) != nil {
			c.log.Debug("upstream: a parked call's answer did not come in time; the call is cancelled")
			p.cancel()
		}
	})
	c.parked[key] = e
	c.mu.Unlock()
	req, _ := json.Marshal(map[string]any{"method": q.method, "params": q.params})
	return &InputRequired{Requests: map[string]json.RawMessage{q.key(): req}, State: roundState{Park: key}.encode()}
}

// unpark takes a parked call out of the table; nil when it is not there.
func (c *Client) unpark(key string) *parkedEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.parked[key]
	if e != nil {
		delete(c.parked, key)
		e.timer.Stop()
	}
	return e
}

// ErrParkedGone is wrapped by CallTool's error when a Resume names a
// parked call that is no longer here.
var ErrParkedGone = errors.New("the call that waited for this answer is no longer open (its wait expired, " +
	"or the server was reconnected); call the tool again")

// resumeParked gives a parked call its client's answer and waits for its
// next event. Without an answer for the question it is asked again.
func (c *Client) resumeParked(ctx context.Context, key string, r *Resume, obs Observer) (json.RawMessage, error) {
	e := c.unpark(key)
	if e == nil {
		return nil, fmt.Errorf("upstream %q: %w", c.name, ErrParkedGone)
	}
	answer, ok := r.Responses[e.q.key()]
	if !ok {
		return nil, c.park(e.p, e.q) // the spec: ask for what is missing again
	}
	e.p.setListener(obs)
	e.q.answer <- answer
	return c.waitParked(ctx, e.p)
}

// cancelParked cancels every parked call (the client is closing).
func (c *Client) cancelParked() {
	c.mu.Lock()
	entries := c.parked
	c.parked = map[string]*parkedEntry{}
	c.mu.Unlock()
	for _, e := range entries {
		e.timer.Stop()
		e.p.cancel()
	}
}
