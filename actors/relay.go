package actors

import (
	"golang.org/x/time/rate"

	"troupe/protocol"
)

// relay decides which of a running call's notices reach the client, as
// the spec asks of a server: progress only for a call that has a progress
// token and only when it grows; log messages only at or above the level
// in force (the session's, set by logging/setLevel, or a 2026-07-28
// request's own, none meaning no log messages) and within a rate limit,
// unless the tool paces itself by its client's reading (Reporter.Ready).
// It holds the session's level and its limiter, made on first use: most
// sessions never log. The session sends what it allows.
type relay struct {
	level   protocol.LoggingLevel
	rate    rate.Limit
	limiter *rate.Limiter
}

// allowLog reports whether a log message (or a tool's own notification)
// of level, for call, is sent; a custom notification passes isLog false.
func (r *relay) allowLog(n *toolNotice, call *inflight) bool {
	if n.isLog {
		level := r.level
		if call.era == protocol.EraStateless {
			if call.level == nil {
				return false // a 2026-07-28 request without a level gets no log messages
			}
			level = *call.level
		}
		if !level.Allows(n.level) {
			return false
		}
	}
	return n.paced || r.allowRate()
}

// allowRate takes a token from the limiter.
func (r *relay) allowRate() bool {
	if r.limiter == nil {
		r.limiter = rate.NewLimiter(r.rate, 2*int(r.rate))
	}
	return r.limiter.Allow()
}

// allowProgress reports whether progress done of call is sent, and notes
// it as sent: values must grow.
func (r *relay) allowProgress(done float64, call *inflight) bool {
	if call.token == nil || (call.reported && done <= call.progress) {
		return false
	}
	call.progress, call.reported = done, true
	return true
}
