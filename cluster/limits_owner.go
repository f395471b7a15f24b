package cluster

import (
	"sync"
	"time"

	"troupe/limits"
)

// ownedLimits are the counters of the keys this node owns (keyOwner): the
// buckets, and the slots each holder member has taken. Other members reach
// them through the limits actor, this node directly; the counters of a
// holder that left the cluster are dropped (drop), so its slots are not
// lost for good. Safe for concurrent use.
type ownedLimits struct {
	buckets limits.Store

	mu    sync.Mutex
	slots map[string]map[string]int // key → holder member → slots
}

func newOwnedLimits() *ownedLimits {
	return &ownedLimits{buckets: limits.NewLocal(), slots: map[string]map[string]int{}}
}

// take takes one call from key's bucket.
func (o *ownedLimits) take(key string, perMinute int) (bool, time.Duration) {
	return o.buckets.Take(key, perMinute)
}

// acquire takes one of max slots of key for holder: max counts the slots
// of every holder.
func (o *ownedLimits) acquire(key string, max int, holder string) bool {
	if max <= 0 {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	total := 0
	for _, n := range o.slots[key] {
		total += n
	}
	if total >= max {
		return false
	}
	byHolder := o.slots[key]
	if byHolder == nil {
		byHolder = map[string]int{}
		o.slots[key] = byHolder
	}
	byHolder[holder]++
	return true
}

// release gives back one of holder's slots of key (none held: nothing).
func (o *ownedLimits) release(key, holder string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	byHolder := o.slots[key]
	if byHolder[holder] > 1 {
		byHolder[holder]--
		return
	}
	delete(byHolder, holder)
	if len(byHolder) == 0 {
		delete(o.slots, key)
	}
}

// drop forgets every slot holder took: it left the cluster, and the calls
// and sessions it held ended with it.
func (o *ownedLimits) drop(holder string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, byHolder := range o.slots {
		delete(byHolder, holder)
		if len(byHolder) == 0 {
			delete(o.slots, key)
		}
	}
}

// held is how many slots of key are taken, by every holder (for tests).
func (o *ownedLimits) held(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	total := 0
	for _, n := range o.slots[key] {
		total += n
	}
	return total
}
