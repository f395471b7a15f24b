// Package limits bounds what each identity may do: calls per minute (in
// all, and per tool glob), calls running at once, and live sessions. The
// bounds key on the identity (identity.Identity.Key), never on a session,
// so a client that initializes again, or opens another session, finds its
// counters where it left them; another identity has its own.
//
// Two parts, both without actors:
//
//   - Store keeps the counters: token buckets for rates, slot counts for
//     concurrency. NewLocal is one process's store; a cluster node gives
//     its own (one owner per key across the nodes).
//   - Limiter applies the configuration to a Store: which limits an
//     identity has (the server's, or a static token's own), which keys
//     each request takes, and the error a refused request answers with
//     (Exceeded).
//
// A session asks the Limiter for each counted request (tools/call,
// prompts/get, resources/read, completion/complete) and the HTTP front
// for each initialize (sessions per identity):
//
//	lim := limits.NewLimiter(limits.NewLocal(), limits.Rules{
//		Default: limits.Limits{CallsPerMinute: 60, MaxConcurrentCalls: 4},
//	})
//	release, over := lim.Call(who, "repo.readFile")
//	if over != nil {
//		// answer over.Error(), code -31429, retry after over.RetryAfter
//	}
//	defer release() // when the call ends
package limits

import (
	"sync"
	"time"
)

// Store keeps identities' counters: one process's memory, or the
// cluster's (one owner per key).
type Store interface {
	// Take takes one call from key's bucket of perMinute (a token bucket
	// refilled perMinute/60 per second, burst perMinute), or says how long
	// until one is free.
	Take(key string, perMinute int) (ok bool, retryAfter time.Duration)
	// Acquire takes one of max slots of key (concurrent calls, sessions);
	// Release gives it back.
	Acquire(key string, max int) bool
	Release(key string)
}

// Local is the Store of one process: a token bucket per rate key and a
// count per slot key, behind one mutex. Its memory follows the traffic of
// the last minute, not every identity ever seen: a bucket that has filled
// up again is the same as no bucket and is forgotten (swept as the map
// grows), and a count that falls to zero is deleted at once.
type Local struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	slots   map[string]int
	// sweepAt is the number of buckets at which the next sweep runs:
	// twice what the last sweep left (at least minSweep), so sweeping
	// costs O(1) per Take on average.
	sweepAt int
}

// minSweep is the bucket count below which no sweep runs.
const minSweep = 256

// bucket is one key's token bucket, kept as the time at which it is full
// again (the generic cell rate algorithm): each call pushes it one
// interval (a minute / perMinute) later, and a call is refused when that
// would put it more than the burst's worth of intervals ahead of now.
// Whole durations, so no rounding makes a retry at the promised time fail.
type bucket struct {
	fullAt    time.Time
	perMinute int
}

func interval(perMinute int) time.Duration { return time.Minute / time.Duration(perMinute) }

// NewLocal returns an empty in-process Store on the wall clock.
func NewLocal() *Local { return NewLocalClock(time.Now) }

// NewLocalClock is NewLocal on the clock now (tests move it by hand).
func NewLocalClock(now func() time.Time) *Local {
	return &Local{now: now, buckets: map[string]*bucket{}, slots: map[string]int{}, sweepAt: minSweep}
}

// Take implements Store. A perMinute of zero or less takes nothing and
// always succeeds: the key has no bound.
func (l *Local) Take(key string, perMinute int) (bool, time.Duration) {
	if perMinute <= 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.sweepAt {
			l.sweep(now)
		}
		b = &bucket{fullAt: now, perMinute: perMinute}
		l.buckets[key] = b
	}
	if b.fullAt.Before(now) {
		b.fullAt = now
	}
	if b.perMinute != perMinute {
		// A reload changed the bound: the calls the bucket owes stay
		// owed, counted at the new interval.
		owed := b.fullAt.Sub(now) * time.Duration(b.perMinute) / time.Duration(perMinute)
		b.fullAt, b.perMinute = now.Add(owed), perMinute
	}
	step := interval(perMinute)
	next := b.fullAt.Add(step)
	if allowed := now.Add(time.Duration(perMinute) * step); next.After(allowed) {
		return false, next.Sub(allowed)
	}
	b.fullAt = next
	return true, 0
}

// sweep forgets the buckets that are full again (l.mu held): a later
// Take makes a full one anew, which is what they hold.
func (l *Local) sweep(now time.Time) {
	for k, b := range l.buckets {
		if !b.fullAt.After(now) {
			delete(l.buckets, k)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.buckets))
}

// Acquire implements Store. A max of zero or less is no bound: nothing is
// counted, and Release of such a key is a no-op.
func (l *Local) Acquire(key string, max int) bool {
	if max <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots[key] >= max {
		return false
	}
	l.slots[key]++
	return true
}

// Release implements Store: it gives back one slot of key; a key with
// none taken is left alone.
func (l *Local) Release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch n := l.slots[key]; {
	case n > 1:
		l.slots[key] = n - 1
	case n == 1:
		delete(l.slots, key)
	}
}

// size is how many buckets and slot counts l holds (tests).
func (l *Local) size() (buckets, slots int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets), len(l.slots)
}
