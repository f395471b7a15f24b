package observe

// The downstream servers' pins (package pins) as metrics: how many tools
// and prompts each event covered, and how many are held now. Server names
// are the configuration's [mcp_servers] names, a bounded set.

// PinEvent counts n tools or prompts of server (kind "tool" or "prompt")
// that one pins event covered (event "pinned", "changed", "restored" or
// "accepted").
func (h *Hub) PinEvent(server, kind, event string, n int) {
	if h == nil || n <= 0 {
		return
	}
	kind = oneOf(kind, "tool", "prompt")
	event = oneOf(event, "pinned", "changed", "restored", "accepted")
	h.m.pinEvents.WithLabelValues(server, kind, event).Add(float64(n))
}

// SetHeld sets troupe_downstream_held to held, the held tools and prompts
// by server, whole: a server it does not name has none held and loses its
// series.
func (h *Hub) SetHeld(held map[string]int) {
	if h == nil {
		return
	}
	h.mu.Lock() // two calls must not interleave their reset and sets
	defer h.mu.Unlock()
	h.m.held.Reset()
	for server, n := range held {
		h.m.held.WithLabelValues(server).Set(float64(n))
	}
}
