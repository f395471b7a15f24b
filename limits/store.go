// Package limits keeps the counters behind troupe's limits per identity:
// token buckets for calls per minute and slots for concurrent calls and
// sessions. A Store is one process's memory (NewLocal) or, on a cluster
// node, the cluster's (package cluster: one owner member per key).
package limits

import "time"

// Store keeps identities' counters: one process's memory, or the cluster's (one owner per key).
type Store interface {
	// Take takes one call from key's bucket of perMinute (a token bucket refilled perMinute/60 per
	// second, burst perMinute), or says how long until one is free.
	Take(key string, perMinute int) (ok bool, retryAfter time.Duration)
	// Acquire takes one of max slots of key (concurrent calls, sessions); Release gives it back.
	Acquire(key string, max int) bool
	Release(key string)
}
