package tools

import "sync/atomic"

// Relayed counts what a call relayed to its client on a downstream
// server's behalf, so the call's audit record says it: a server that
// drives the client's model (sampling) is something an operator reviews.
// The zero value is ready; a nil *Relayed counts nothing. Safe for
// concurrent use (a proxied call relays from the downstream client's
// goroutines).
type Relayed struct {
	sampling atomic.Int64
}

// Sampled records one sampling/createMessage relayed to the client.
func (r *Relayed) Sampled() {
	if r != nil {
		r.sampling.Add(1)
	}
}

// Sampling is how many sampling requests were relayed; 0 for nil.
func (r *Relayed) Sampling() int64 {
	if r == nil {
		return 0
	}
	return r.sampling.Load()
}
