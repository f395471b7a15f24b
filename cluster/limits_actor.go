package cluster

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/cluster/wire"
)

// limitsName is the name of every node's limits actor: a node asks a key's
// owner by the owner's remote address alone.
const limitsName = "troupe-limits"

// limitsActor serves the counters of the keys this node owns to the other
// members: LimitTake and LimitAcquire are answered (LimitTaken,
// LimitAcquired), LimitRelease is not. The counters are shared with this
// node's own store (ownedLimits locks), so the actor only translates.
type limitsActor struct {
	owned *ownedLimits
}

// Receive implements actor.Actor.
func (a *limitsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.LimitTake:
		ok, wait := a.owned.take(m.GetKey(), int(m.GetPerMinute()))
		// Rounded up: a retry at the time promised must find a call free.
		ctx.Respond(&wire.LimitTaken{Ok: ok, RetryAfterMs: int64((wait + time.Millisecond - 1) / time.Millisecond)})
	case *wire.LimitAcquire:
		ctx.Respond(&wire.LimitAcquired{Ok: a.owned.acquire(m.GetKey(), int(m.GetMax()), m.GetHolder(), m.GetSlot())})
	case *wire.LimitRelease:
		a.owned.release(m.GetKey(), m.GetHolder(), m.GetSlot())
	}
}
