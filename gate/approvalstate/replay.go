package approvalstate

import (
	"container/heap"
	"fmt"
)

// replayCache remembers the nonces of used states until they expire, in
// at most limit entries. A nonce is only worth remembering while its state
// could still open; after that Open refuses the state as expired, so
// expired nonces are forgotten first, and a cache full of live ones refuses
// new states rather than forget one (which would let it open again).
// Not safe for concurrent use: the Sealer locks around it.
type replayCache struct {
	limit int
	seen  map[[nonceSize]byte]struct{}
	queue expiryHeap // the same nonces, soonest expiry first
}

func newReplayCache(limit int) *replayCache {
	return &replayCache{limit: limit, seen: map[[nonceSize]byte]struct{}{}}
}

// use records nonce, which stays valid until expires (Unix ms), at now.
func (c *replayCache) use(nonce [nonceSize]byte, expires, now int64) error {
	for len(c.queue) > 0 && c.queue[0].expires <= now {
		delete(c.seen, heap.Pop(&c.queue).(entry).nonce)
	}
	if _, ok := c.seen[nonce]; ok {
		return ErrReplayed
	}
	if len(c.seen) >= c.limit {
		return fmt.Errorf("%w: %d states used within approvals.timeout, the most this process remembers; "+
			"ask again once some have expired", ErrBusy, c.limit)
	}
	c.seen[nonce] = struct{}{}
	heap.Push(&c.queue, entry{nonce: nonce, expires: expires})
	return nil
}

func (c *replayCache) len() int { return len(c.seen) }

type entry struct {
	nonce   [nonceSize]byte
	expires int64
}

// expiryHeap is a container/heap of entries by expiry.
type expiryHeap []entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires < h[j].expires }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
