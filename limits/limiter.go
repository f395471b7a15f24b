package limits

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"troupe/identity"
)

// Limits are one identity's bounds; a zero field is no bound.
type Limits struct {
	// CallsPerMinute bounds the identity's counted requests.
	CallsPerMinute int
	// Tools bounds calls per minute of the tools a glob (path.Match over
	// exposed names) matches, per glob: a call counts against every glob
	// that matches its tool.
	Tools map[string]int
	// MaxConcurrentCalls bounds the identity's calls running at once.
	MaxConcurrentCalls int
	// MaxSessions bounds the identity's live HTTP sessions.
	MaxSessions int
}

// Rules are the limits of every identity: the server's, and the static
// tokens' own.
type Rules struct {
	// Default is [limits.rate] and [limits.identity].
	Default Limits
	// Tokens are the static tokens' own limits by token name: a non-zero
	// field replaces Default's, and a tool glob the token names replaces
	// the server's bound for that glob (the others stay).
	Tokens map[string]Limits
}

// Limiter applies Rules to a Store. Its rules change with Set (a reload)
// and apply to the requests that come after; what a running call or a
// live session holds is given back to the store and key it was taken
// from.
type Limiter struct {
	store atomic.Pointer[storeRef]
	rules atomic.Pointer[compiled]
	// onExceeded is told of every refusal (OnExceeded); nil: nobody.
	onExceeded atomic.Pointer[func(*Exceeded)]
}

// OnExceeded tells f of every request the Limiter refuses, as it refuses
// it: the metrics count them by identity and limit. f must be quick and
// must not call the Limiter.
func (l *Limiter) OnExceeded(f func(*Exceeded)) { l.onExceeded.Store(&f) }

// refuse reports over to OnExceeded's function and returns it.
func (l *Limiter) refuse(over *Exceeded) *Exceeded {
	if f := l.onExceeded.Load(); f != nil && *f != nil {
		(*f)(over)
	}
	return over
}

// The limits an Exceeded names (Exceeded.Limit): a bounded set, fit for a
// metric label.
const (
	LimitCallsPerMinute     = "calls_per_minute"
	LimitToolCallsPerMinute = "tool_calls_per_minute"
	LimitConcurrentCalls    = "max_concurrent_calls"
	LimitSessions           = "max_sessions"
)

// compiled is Rules as the requests read them: every identity's
// effective limits worked out once, at Set, not per request.
type compiled struct {
	server effective
	tokens map[string]*effective // by token name, for the tokens with limits of their own
}

// effectiveFor is who's limits.
func (c *compiled) effectiveFor(who *identity.Identity) *effective {
	if who != nil && who.Kind == identity.Token {
		if e, ok := c.tokens[who.Name]; ok {
			return e
		}
	}
	return &c.server
}

type storeRef struct{ Store }

// NewLimiter returns a Limiter of rules over store.
func NewLimiter(store Store, rules Rules) *Limiter {
	l := &Limiter{}
	l.UseStore(store)
	l.Set(rules)
	return l
}

// Set replaces the rules for later requests.
func (l *Limiter) Set(rules Rules) {
	c := &compiled{server: rules.effective("")}
	for name := range rules.Tokens {
		if c.tokens == nil {
			c.tokens = map[string]*effective{}
		}
		e := rules.effective(name)
		c.tokens[name] = &e
	}
	l.rules.Store(c)
}

// UseStore makes later requests count in store: a cluster node's, once
// the node has joined (after the sessions' Host is made). What was
// counted in the last store stays there.
func (l *Limiter) UseStore(store Store) { l.store.Store(&storeRef{store}) }

// The suffixes of an identity's keys in the Store.
const (
	suffixRate     = "\x00rate"
	suffixTool     = "\x00tool\x00"
	suffixCalls    = "\x00calls"
	suffixSessions = "\x00sessions"
)

// Exceeded is a request refused by a limit: which identity, which limit,
// the setting that raises it, and when to try again.
type Exceeded struct {
	// Identity names who was refused (identity.Identity.String).
	Identity string
	// Limit is which kind of limit refused it: LimitCallsPerMinute,
	// LimitToolCallsPerMinute, LimitConcurrentCalls or LimitSessions.
	Limit string
	// What is the limit in words ("60 calls per minute").
	What string
	// Key is the setting that raises the limit
	// ("limits.rate.calls_per_minute", or the token's own).
	Key string
	// RetryAfter is when a retry can succeed (a rate), or a hint (slots
	// free when a call or session ends).
	RetryAfter time.Duration
}

// Error is the refusal as the client reads it.
func (e *Exceeded) Error() string {
	return fmt.Sprintf("rate limited: %s is over its limit of %s (%s); retry in %d s",
		e.Identity, e.What, e.Key, e.RetryAfterSeconds())
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1
// (the unit of HTTP's Retry-After).
func (e *Exceeded) RetryAfterSeconds() int {
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}

// slotRetry is the retry hint of a slot limit: a slot frees when a call
// or a session ends, which no clock can say.
const slotRetry = time.Second

// bound is one limit an identity has, with the setting it comes from.
type bound struct {
	n   int
	key string
}

// effective is who's limits under r, each with the setting it comes from.
type effective struct {
	rate, calls, sessions bound
	tools                 map[string]bound
	globs                 []string // tools' keys, sorted: the order they are taken in
}

// effective is the limits of the token named token ("": of any other
// identity) under r, each with the setting it comes from.
func (r *Rules) effective(token string) effective {
	d := r.Default
	e := effective{
		rate:     bound{d.CallsPerMinute, "limits.rate.calls_per_minute"},
		calls:    bound{d.MaxConcurrentCalls, "limits.identity.max_concurrent_calls"},
		sessions: bound{d.MaxSessions, "limits.identity.max_sessions"},
	}
	for g, n := range d.Tools {
		e.setTool(g, bound{n, "limits.rate.tools." + strconv.Quote(g)})
	}
	if token != "" {
		if t, ok := r.Tokens[token]; ok {
			own := "auth.tokens[name=" + strconv.Quote(token) + "]"
			if t.CallsPerMinute > 0 {
				e.rate = bound{t.CallsPerMinute, own + ".rate.calls_per_minute"}
			}
			if t.MaxConcurrentCalls > 0 {
				e.calls = bound{t.MaxConcurrentCalls, own + ".identity.max_concurrent_calls"}
			}
			if t.MaxSessions > 0 {
				e.sessions = bound{t.MaxSessions, own + ".identity.max_sessions"}
			}
			for g, n := range t.Tools {
				e.setTool(g, bound{n, own + ".rate.tools." + strconv.Quote(g)})
			}
		}
	}
	e.globs = slices.Sorted(maps.Keys(e.tools))
	return e
}

func (e *effective) setTool(glob string, b bound) {
	if e.tools == nil {
		e.tools = map[string]bound{}
	}
	e.tools[glob] = b
}

// keyOf is who's key in the Store; nil is the local user (stdio).
func keyOf(who *identity.Identity) (key, name string) {
	if who == nil {
		return "local", "local"
	}
	return who.Key(), who.String()
}

// Call takes what one counted request of who needs: a slot of its
// concurrent calls, then a call of each tool glob that matches tool (""
// for requests that are not tool calls), then a call of its calls per
// minute. It returns the release to run when the request ends (a no-op
// when no slot was taken), or the first limit it is over; a request
// refused by a later limit keeps the calls per minute it took of earlier
// ones (it was made) and holds no slot.
func (l *Limiter) Call(who *identity.Identity, tool string) (release func(), over *Exceeded) {
	e := l.rules.Load().effectiveFor(who)
	release = func() {}
	if e.calls.n <= 0 && e.rate.n <= 0 && (len(e.globs) == 0 || tool == "") {
		return release, nil // nothing to count (no limits configured)
	}
	key, name := keyOf(who)
	store := l.store.Load().Store
	if e.calls.n > 0 {
		if !store.Acquire(key+suffixCalls, e.calls.n) {
			return nil, l.refuse(&Exceeded{Identity: name, Limit: LimitConcurrentCalls, What: strconv.Itoa(e.calls.n) + " concurrent calls",
				Key: e.calls.key, RetryAfter: slotRetry})
		}
		release = onceRelease(store, key+suffixCalls)
	}
	if tool != "" {
		for _, g := range e.globs {
			b := e.tools[g]
			if b.n <= 0 || !matches(g, tool) {
				continue
			}
			if ok, wait := store.Take(key+suffixTool+g, b.n); !ok {
				release()
				return nil, l.refuse(&Exceeded{Identity: name, Limit: LimitToolCallsPerMinute, What: strconv.Itoa(b.n) + " calls per minute of " + g,
					Key: b.key, RetryAfter: wait})
			}
		}
	}
	if e.rate.n > 0 {
		if ok, wait := store.Take(key+suffixRate, e.rate.n); !ok {
			release()
			return nil, l.refuse(&Exceeded{Identity: name, Limit: LimitCallsPerMinute, What: strconv.Itoa(e.rate.n) + " calls per minute",
				Key: e.rate.key, RetryAfter: wait})
		}
	}
	return release, nil
}

// Session takes one of who's session slots, for a new session; release
// gives it back when the session ends (a no-op without a bound).
func (l *Limiter) Session(who *identity.Identity) (release func(), over *Exceeded) {
	e := l.rules.Load().effectiveFor(who)
	if e.sessions.n <= 0 {
		return func() {}, nil
	}
	key, name := keyOf(who)
	store := l.store.Load().Store
	if !store.Acquire(key+suffixSessions, e.sessions.n) {
		return nil, l.refuse(&Exceeded{Identity: name, Limit: LimitSessions, What: strconv.Itoa(e.sessions.n) + " sessions",
			Key: e.sessions.key, RetryAfter: slotRetry})
	}
	return onceRelease(store, key+suffixSessions), nil
}

// onceRelease gives key's slot back the first time it runs, so a release
// run twice (a call's two endings) cannot free another call's slot.
func onceRelease(s Store, key string) func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			s.Release(key)
		}
	}
}

func matches(glob, name string) bool {
	ok, err := path.Match(glob, name)
	return err == nil && ok
}
