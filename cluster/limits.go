package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/cluster/wire"
	"troupe/limits"
)

// ownerTimeout bounds a question to a key's owner. A hop is about a
// millisecond; an owner that does not answer in this time has most likely
// gone, and the membership drops it within seconds.
const ownerTimeout = 500 * time.Millisecond

// downFor is how long a node decides alone after a key's owner failed to
// answer, before it asks that owner again: calls do not each wait
// ownerTimeout while the membership has not dropped it yet.
const downFor = 2 * time.Second

// warnEvery is the least time between two logs of unreachable owners.
const warnEvery = 10 * time.Second

// nodeLimits is the cluster's limits.Store (Node.Limits): each key has one
// owner member, keyOwner over the live members, which keeps the key's
// bucket and slots (ownedLimits); the other members ask it over the remote
// (the owner's limits actor). So a limit holds for the cluster as a whole,
// not per node. A counter lost with its owner starts empty on the next
// owner.
//
// When the owner cannot be reached within ownerTimeout, the node decides
// with its own in-process counters (fallback) for downFor, then asks
// again: a limit then holds per node until the owner answers or the
// membership drops it — fail-open, but bounded. Each such decision is
// counted (Node.Info: LimitFallbacks) and logged at most once every
// warnEvery.
type nodeLimits struct {
	n        *Node
	owned    *ownedLimits
	fallback limits.Store
	timeout  time.Duration

	// held records, per key, where each slot this node took is counted
	// (the owner's member id, or "" for fallback) and its number, so
	// Release gives it back where it was taken even when the key's owner
	// has changed since.
	mu    sync.Mutex
	held  map[string][]heldSlot
	slots atomic.Uint64 // the last slot number given

	downMu sync.Mutex
	down   map[string]time.Time // owner → when it last failed to answer

	fallbacks atomic.Uint64
	warnMu    sync.Mutex
	warnedAt  time.Time
	unwarned  uint64
}

func newNodeLimits(n *Node) *nodeLimits {
	return &nodeLimits{n: n, owned: newOwnedLimits(), fallback: limits.NewLocal(), timeout: ownerTimeout,
		held: map[string][]heldSlot{}, down: map[string]time.Time{}}
}

// Limits is the cluster's store of limit counters: give it to the host
// instead of limits.NewLocal, and a limit holds for the cluster.
func (n *Node) Limits() limits.Store { return n.limits }

// startLimits spawns the limits actor, which serves the keys this node
// owns to the other members.
func (n *Node) startLimits() error {
	_, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &limitsActor{owned: n.limits.owned}
	}), limitsName)
	return err
}

// owner is key's owner and its remote address; local is true when it is
// this node (also before the node sees any member).
func (l *nodeLimits) owner(key string) (member, address string, local bool) {
	t := l.n.topology.Load()
	member = keyOwner(key, t.IDs())
	if member == "" || member == l.n.self {
		return l.n.self, "", true
	}
	address, ok := t.Address(member)
	if !ok {
		return l.n.self, "", true
	}
	return member, address, false
}

// errOwnerDown is ask's error for an owner that failed within downFor.
var errOwnerDown = errors.New("it did not answer a moment ago")

// ask sends msg to the limits actor of member at address and waits for its
// answer; an owner that has just failed to answer is not asked again
// before downFor.
func (l *nodeLimits) ask(member, address string, msg any) (any, error) {
	l.downMu.Lock()
	failed, isDown := l.down[member]
	if isDown && time.Since(failed) >= downFor {
		delete(l.down, member)
		isDown = false
	}
	l.downMu.Unlock()
	if isDown {
		return nil, errOwnerDown
	}
	res, err := l.n.system.Root.RequestFuture(actor.NewPID(address, limitsName), msg, l.timeout).Result()
	if err != nil {
		l.downMu.Lock()
		l.down[member] = time.Now()
		l.downMu.Unlock()
	}
	return res, err
}

// Take implements limits.Store.
func (l *nodeLimits) Take(key string, perMinute int) (bool, time.Duration) {
	if perMinute <= 0 {
		return true, 0
	}
	member, address, local := l.owner(key)
	if local {
		return l.owned.take(key, perMinute)
	}
	res, err := l.ask(member, address, &wire.LimitTake{Key: key, PerMinute: int32(min(perMinute, 1<<31-1))})
	if taken, ok := res.(*wire.LimitTaken); err == nil && ok {
		return taken.GetOk(), time.Duration(taken.GetRetryAfterMs()) * time.Millisecond
	}
	l.unreachable(member, err)
	return l.fallback.Take(key, perMinute)
}

// heldSlot is a slot this node took: at which owner ("" for fallback),
// under which number.
type heldSlot struct {
	owner string
	n     uint64
}

// Acquire implements limits.Store.
func (l *nodeLimits) Acquire(key string, max int) bool {
	if max <= 0 {
		return true
	}
	member, address, local := l.owner(key)
	slot := heldSlot{owner: member, n: l.slots.Add(1)}
	var ok bool
	switch {
	case local:
		ok = l.owned.acquire(key, max, l.n.self, slot.n)
	default:
		res, err := l.ask(member, address, &wire.LimitAcquire{Key: key, Max: int32(min(max, 1<<31-1)), Holder: l.n.self, Slot: slot.n})
		if got, isAnswer := res.(*wire.LimitAcquired); err == nil && isAnswer {
			ok = got.GetOk()
			break
		}
		if !errors.Is(err, errOwnerDown) {
			// The question may yet arrive and take a slot: this release,
			// sent after it on the same stream, gives it back.
			l.send(member, &wire.LimitRelease{Key: key, Holder: l.n.self, Slot: slot.n})
		}
		l.unreachable(member, err)
		slot.owner, ok = "", l.fallback.Acquire(key, max)
	}
	if ok {
		l.mu.Lock()
		l.held[key] = append(l.held[key], slot)
		l.mu.Unlock()
	}
	return ok
}

// Release implements limits.Store: the slot goes back where it was taken.
// An owner that has left took its counts with it: nothing to give back.
func (l *nodeLimits) Release(key string) {
	l.mu.Lock()
	at := l.held[key]
	if len(at) == 0 {
		l.mu.Unlock()
		return // never taken (no limit, or refused)
	}
	slot := at[len(at)-1]
	if len(at) == 1 {
		delete(l.held, key)
	} else {
		l.held[key] = at[:len(at)-1]
	}
	l.mu.Unlock()
	switch slot.owner {
	case "":
		l.fallback.Release(key)
	case l.n.self:
		l.owned.release(key, slot.owner, slot.n)
	default:
		l.send(slot.owner, &wire.LimitRelease{Key: key, Holder: l.n.self, Slot: slot.n})
	}
}

// send sends a message that is not answered to member's limits actor, if
// it is still a member. The remote keeps the order of what one node sends
// another, so a release arrives after the acquire it undoes.
func (l *nodeLimits) send(member string, msg any) {
	if address, live := l.n.topology.Load().Address(member); live {
		l.n.system.Root.Send(actor.NewPID(address, limitsName), msg)
	}
}

// unreachable counts and logs (at most once every warnEvery) a decision
// taken without the key's owner.
func (l *nodeLimits) unreachable(member string, err error) {
	l.fallbacks.Add(1)
	l.warnMu.Lock()
	defer l.warnMu.Unlock()
	now := time.Now()
	if now.Sub(l.warnedAt) < warnEvery {
		l.unwarned++
		return
	}
	l.n.log.Warn("cluster: a limit's owner did not answer; deciding with this node's own counters until it does "+
		"(the limit holds per node meanwhile)", "owner", member, "err", errString(err), "unreported_before", l.unwarned)
	l.warnedAt, l.unwarned = now, 0
}

func errString(err error) string {
	if err == nil {
		return "unexpected answer"
	}
	return err.Error()
}

// holderLeft drops the slots a member that left held of the keys this
// node owns.
func (l *nodeLimits) holderLeft(member string) {
	l.owned.drop(member)
	l.downMu.Lock()
	delete(l.down, member) // the map keeps only live members
	l.downMu.Unlock()
}
