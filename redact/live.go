package redact

import "sync/atomic"

// Live holds the server's current Redactor. The config watcher Stores a new
// one on reload while logging goroutines Load it; both are atomic. The zero
// value is ready and masks nothing until the first Store.
type Live struct {
	p atomic.Pointer[Redactor]
}

// Load returns the current Redactor; nil (which masks nothing) before the
// first Store.
func (l *Live) Load() *Redactor { return l.p.Load() }

// Store makes r the current Redactor; nil masks nothing.
func (l *Live) Store(r *Redactor) { l.p.Store(r) }
