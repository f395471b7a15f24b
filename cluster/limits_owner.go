package cluster

import (
	"sync"
	"time"

	"troupe/limits"
)

// ownedLimits are the counters of the keys this node owns (keyOwner): the
// buckets, and the slots each holder member has taken, each under the
// holder's own number for it. Other members reach them through the limits
// actor, this node directly. A slot is given back by its number, so a
// release that arrives twice, or for an acquire whose answer came too late
// to count, frees nothing else; the slots of a holder that left the
// cluster are dropped (drop), so they are not lost for good. Safe for
// concurrent use.
type ownedLimits struct {
	buckets limits.Store

	mu    sync.Mutex
	slots map[string]map[slotRef]struct{} // key → the slots taken
}

// slotRef names one slot: its holder member and the holder's number for it.
type slotRef struct {
	holder string
	n      uint64
}

func newOwnedLimits() *ownedLimits {
	return &ownedLimits{buckets: limits.NewLocal(), slots: map[string]map[slotRef]struct{}{}}
}

// take takes one call from key's bucket.
func (o *ownedLimits) take(key string, perMinute int) (bool, time.Duration) {
	return o.buckets.Take(key, perMinute)
}

// acquire takes one of max slots of key for holder, numbered n: max counts
// the slots of every holder. A slot already held is held (true).
func (o *ownedLimits) acquire(key string, max int, holder string, n uint64) bool {
	if max <= 0 {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	taken := o.slots[key]
	ref := slotRef{holder, n}
	if _, ok := taken[ref]; ok {
		return true
	}
	if len(taken) >= max {
		return false
	}
	if taken == nil {
		taken = map[slotRef]struct{}{}
		o.slots[key] = taken
	}
	taken[ref] = struct{}{}
	return true
}

// release gives back holder's slot n of key (not held: nothing).
func (o *ownedLimits) release(key, holder string, n uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	taken := o.slots[key]
	delete(taken, slotRef{holder, n})
	if len(taken) == 0 {
		delete(o.slots, key)
	}
}

// drop forgets every slot holder took: it left the cluster, and the calls
// and sessions it held ended with it.
func (o *ownedLimits) drop(holder string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, taken := range o.slots {
		for ref := range taken {
			if ref.holder == holder {
				delete(taken, ref)
			}
		}
		if len(taken) == 0 {
			delete(o.slots, key)
		}
	}
}

// held is how many slots of key are taken, by every holder (for tests).
func (o *ownedLimits) held(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.slots[key])
}
