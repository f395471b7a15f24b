package app

import (
	"sync"
	"time"
)

// noticeInterval is the shortest time between two notifications of one
// kind (a list's list_changed, one URI's resources/updated) that troupe
// passes on to its sessions: a server that sends thousands a second
// costs the sessions at most one per interval.
const noticeInterval = 100 * time.Millisecond

// coalescer passes on bursts of notifications at a bounded rate, as
// tools' list_changed floods are (one listing in flight, one pending):
// the first of a key goes at once; those that come within the interval
// after it are folded into one, the latest, sent when the interval ends.
// It holds one entry per key that had a notification in the last two
// intervals, so what it keeps is bounded by the keys its callers allow
// (the held URIs, the lists). A nil coalescer passes everything on.
type coalescer struct {
	interval time.Duration

	mu      sync.Mutex
	keys    map[string]*coalesced
	stopped bool
}

// coalesced is one key's window: its timer, and the latest notification
// that came within it, if any.
type coalesced struct {
	timer   *time.Timer
	pending func()
}

// newCoalescer is a coalescer with the given interval.
func newCoalescer(interval time.Duration) *coalescer {
	return &coalescer{interval: interval, keys: map[string]*coalesced{}}
}

// send passes deliver on now, or folds it into key's window (a later one
// replaces an earlier one: deliver should send the latest state).
func (c *coalescer) send(key string, deliver func()) {
	if c == nil {
		deliver()
		return
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	if k, ok := c.keys[key]; ok {
		k.pending = deliver
		c.mu.Unlock()
		return
	}
	k := &coalesced{}
	k.timer = time.AfterFunc(c.interval, func() { c.flush(key, k) })
	c.keys[key] = k
	c.mu.Unlock()
	deliver()
}

// flush ends one interval of key's window: the notification folded into
// it goes, and another interval starts; without one the window closes.
func (c *coalescer) flush(key string, k *coalesced) {
	c.mu.Lock()
	if c.stopped || c.keys[key] != k {
		c.mu.Unlock()
		return
	}
	deliver := k.pending
	if deliver == nil {
		delete(c.keys, key)
		c.mu.Unlock()
		return
	}
	k.pending = nil
	k.timer.Reset(c.interval)
	c.mu.Unlock()
	deliver()
}

// stop drops what is pending and sends nothing more (troupe is shutting
// down); its timers stop.
func (c *coalescer) stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for key, k := range c.keys {
		k.timer.Stop()
		delete(c.keys, key)
	}
}
