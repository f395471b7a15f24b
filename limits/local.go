package limits

import (
	"sync"
	"time"
)

// Local is the in-process Store: buckets and slots in this process's
// memory, safe for concurrent use.
type Local struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*bucket
	slots   map[string]int
	takes   int
}

// bucket is one token bucket: tokens at the time of the last take.
type bucket struct {
	tokens float64
	at     time.Time
	rate   int // perMinute it was made with
}

// NewLocal returns an empty in-process Store.
func NewLocal() *Local {
	return &Local{now: time.Now, buckets: map[string]*bucket{}, slots: map[string]int{}}
}

// sweepEvery is how many takes pass between sweeps of the buckets that
// have refilled: a full bucket is the same as none, so idle keys do not
// stay in memory.
const sweepEvery = 1024

// Take implements Store.
func (l *Local) Take(key string, perMinute int) (bool, time.Duration) {
	if perMinute <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.takes++; l.takes%sweepEvery == 0 {
		l.sweep(now)
	}
	b := l.buckets[key]
	if b == nil || b.rate != perMinute {
		b = &bucket{tokens: float64(perMinute), at: now, rate: perMinute}
		l.buckets[key] = b
	}
	perSecond := float64(perMinute) / 60
	b.tokens = min(float64(perMinute), b.tokens+now.Sub(b.at).Seconds()*perSecond)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / perSecond * float64(time.Second))
	return false, wait
}

// sweep forgets the buckets that are full again.
func (l *Local) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*float64(b.rate)/60 >= float64(b.rate) {
			delete(l.buckets, k)
		}
	}
}

// Acquire implements Store.
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

// Release implements Store. Releasing a key with no slot taken does
// nothing.
func (l *Local) Release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.slots[key]; n > 1 {
		l.slots[key] = n - 1
	} else {
		delete(l.slots, key)
	}
}
