package tools

// Session is the MCP session a call runs in, for tools that keep state per
// session: Codex's management methods keep the conversations a session
// created and the event listeners it added. It is nil for calls that have
// no session (2026-07-28 requests).
type Session interface {
	// ID names the session; it is unique for the server's lifetime.
	ID() string
	// Notify sends a notification to the session's client, also after the
	// call that got this Session has ended; once the session is gone it is
	// dropped. It never blocks: the session's own bounds and rate apply.
	Notify(method string, params any)
	// Client asks the session's client something outside any call (Codex
	// asking to run a command in a turn that a management method
	// started): the request is bounded and cancelled like a call's, and
	// fails with *ClientError once the session ends.
	Client() Client
}

// SessionEnder is implemented by tools that keep state per session: when a
// session ends, troupe calls SessionEnded with its id on every tool of the
// registry it served methods from (SessionOptions.Methods), so the tool can
// stop what it started for that session (a Codex process, listeners). It
// runs on the session's goroutine and must not block.
type SessionEnder interface {
	SessionEnded(id string)
}

// SessionEnded tells every tool of r that implements SessionEnder that
// the session id has ended. Tools sharing one state see it once each, so
// their SessionEnded must be idempotent.
func (r *Registry) SessionEnded(id string) {
	if r == nil {
		return
	}
	for _, e := range r.entries {
		if s, ok := Implements[SessionEnder](e.Tool); ok {
			s.SessionEnded(id)
		}
	}
}

// SessionWaiter is implemented by tools whose SessionEnded leaves work
// running in the background (a Codex process shutting down, so that
// SessionEnded need not block): Wait returns once all of it is done.
type SessionWaiter interface {
	Wait()
}

// WaitSessionsEnded waits for the background work of every tool of r that
// implements SessionWaiter: the server calls it once its sessions have
// ended, so it exits leaving no process behind.
func (r *Registry) WaitSessionsEnded() {
	if r == nil {
		return
	}
	for _, e := range r.entries {
		if w, ok := Implements[SessionWaiter](e.Tool); ok {
			w.Wait()
		}
	}
}
