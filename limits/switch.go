package limits

import (
	"sync/atomic"
	"time"
)

// Switch is a Store that passes every question to another Store, which
// can be replaced while in use. troupe builds its host (and the Limiter on
// it) before a cluster node has joined its cluster: the host's Limiter
// uses a Switch of NewLocal, set to the cluster's store once joined.
type Switch struct {
	to atomic.Pointer[Store]
}

// NewSwitch returns a Switch passing to s.
func NewSwitch(s Store) *Switch {
	w := &Switch{}
	w.Set(s)
	return w
}

// Set makes the Switch pass to s from now on. A slot taken before is
// released on s, which gives back nothing it did not give: set the store
// before the counted traffic starts (a node joins before it serves HTTP).
func (w *Switch) Set(s Store) { w.to.Store(&s) }

// Take implements Store.
func (w *Switch) Take(key string, perMinute int) (bool, time.Duration) {
	return (*w.to.Load()).Take(key, perMinute)
}

// Acquire implements Store.
func (w *Switch) Acquire(key string, max int) bool { return (*w.to.Load()).Acquire(key, max) }

// Release implements Store.
func (w *Switch) Release(key string) { (*w.to.Load()).Release(key) }
