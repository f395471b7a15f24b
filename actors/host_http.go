package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/actors/httptransport"
	"troupe/identity"
)

// HTTPOptions bound the state an HTTP session may hold. The zero value of
// each means its default.
type HTTPOptions struct {
	// IdleTimeout ends a session nobody touched for this long and whose
	// streams have no reader (default 30 min).
	IdleTimeout time.Duration
	// StreamEvents and StreamBytes bound each stream's replay log
	// (defaults 256 events, 4 MiB); older events are dropped first.
	StreamEvents int
	StreamBytes  int
}

func (o HTTPOptions) withDefaults() HTTPOptions {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Minute
	}
	if o.StreamEvents <= 0 {
		o.StreamEvents = 256
	}
	if o.StreamBytes <= 0 {
		o.StreamBytes = 4 << 20
	}
	return o
}

// StartHTTPSession starts a session with the given id (made by the HTTP
// front, unguessable) for who (nil: Anonymous), and returns the front's
// handle on it; onEnd runs once when the session has ended,
// for whatever reason.
func (h *Host) StartHTTPSession(id string, who *identity.Identity, onEnd func()) (*httptransport.Handle, error) {
	hd := httptransport.NewHandle(id, who, onEnd, &h.opts.httpLimits)
	res, err := h.system.Root.RequestFuture(h.server, &serveHTTP{handle: hd}, 10*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("start http session: %w", err)
	}
	hd.Bind(h.system.Root, res.(*actor.PID))
	return hd, nil
}
