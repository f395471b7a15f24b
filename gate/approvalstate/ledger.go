package approvalstate

import (
	"container/heap"
	"errors"
	"fmt"
	"time"
)

// ledger is the Sealer's memory of the states it issued or opened, each
// kept until it expires: a state counts against its caller from the
// moment it is sealed (or, sealed by another process, first opened here)
// until its expiry, whether it was answered, denied or never came back.
// That is what "outstanding" means. Answering does not free a slot early:
// a used state's nonce must be remembered until the state expires, or it
// could open again (a denied state, replayed with "once", would run the
// call), so a caller that answers its own states to churn them still holds
// one slot per state for approvals.timeout.
//
// Two bounds: perCaller, each caller's share, so a caller that fills it is
// refused alone; and total, what the process remembers for every caller
// together (a memory bound, several shares wide). When either is full the
// ledger refuses to issue rather than forget a live nonce. Expired entries
// go first, at every operation.
//
// Not safe for concurrent use: the Sealer locks around it.
type ledger struct {
	total, perCaller int
	states           map[[nonceSize]byte]*record
	queue            expiryHeap // the same nonces, soonest expiry first
	callers          map[Caller]*share
}

// record is one remembered state.
type record struct {
	share *share
	used  bool
}

// share is what one caller has outstanding.
type share struct {
	caller Caller
	n      int
}

func newLedger(total, perCaller int) *ledger {
	return &ledger{total: total, perCaller: perCaller,
		states: map[[nonceSize]byte]*record{}, callers: map[Caller]*share{}}
}

// expire forgets every state that expired by now (Unix ms).
func (l *ledger) expire(now int64) {
	for len(l.queue) > 0 && l.queue[0].expires <= now {
		nonce := heap.Pop(&l.queue).(entry).nonce
		r := l.states[nonce]
		delete(l.states, nonce)
		if r.share.n--; r.share.n == 0 {
			delete(l.callers, r.share.caller)
		}
	}
}

// add remembers a state of caller until expires, or refuses with a
// *BusyError when the caller's share or the total is full.
func (l *ledger) add(nonce [nonceSize]byte, caller Caller, expires int64, used bool, ttl time.Duration) error {
	s := l.callers[caller]
	switch {
	case s != nil && s.n >= l.perCaller:
		return &BusyError{Caller: caller, PerCaller: true, Limit: l.perCaller, TTL: ttl}
	case len(l.states) >= l.total:
		return &BusyError{Caller: caller, Limit: l.total, TTL: ttl}
	}
	if s == nil {
		s = &share{caller: caller}
		l.callers[caller] = s
	}
	s.n++
	l.states[nonce] = &record{share: s, used: used}
	heap.Push(&l.queue, entry{nonce: nonce, expires: expires})
	return nil
}

// check reports whether the state with nonce can still be used: ErrReplayed
// once it has been.
func (l *ledger) check(nonce [nonceSize]byte, now int64) error {
	l.expire(now)
	if r := l.states[nonce]; r != nil && r.used {
		return ErrReplayed
	}
	return nil
}

// use marks the state with nonce used: ErrReplayed when it was already.
// A state this process did not issue (another process's, under a shared
// key) is remembered from now on, against its caller's share.
func (l *ledger) use(nonce [nonceSize]byte, caller Caller, expires, now int64, ttl time.Duration) error {
	l.expire(now)
	if r := l.states[nonce]; r != nil {
		if r.used {
			return ErrReplayed
		}
		r.used = true
		return nil
	}
	return l.add(nonce, caller, expires, true, ttl)
}

func (l *ledger) len() int { return len(l.states) }

// outstanding is how many states caller has outstanding.
func (l *ledger) outstanding(caller Caller) int {
	if s := l.callers[caller]; s != nil {
		return s.n
	}
	return 0
}

// ErrCallerBusy is the refusal of a caller that has its whole share of
// states outstanding (Options.MaxPerCaller); other callers are not
// affected. A *BusyError with PerCaller set matches it and ErrBusy.
var ErrCallerBusy = errors.New("this caller has too many approval states outstanding")

// BusyError is Seal's (or, for a state another process sealed, Open's)
// refusal when a bound of outstanding states is full: the caller's own
// share (PerCaller), or the process's total. It matches ErrBusy, and
// ErrCallerBusy when PerCaller is set.
type BusyError struct {
	// Caller is who was refused.
	Caller Caller
	// PerCaller is true when the caller's own share is full, false when
	// the total of every caller's is.
	PerCaller bool
	// Limit is the bound that is full.
	Limit int
	// TTL is how long a state stays outstanding (approvals.timeout).
	TTL time.Duration
}

// Error says whose limit it is and when room comes back, without naming
// the caller's credential.
func (e *BusyError) Error() string {
	if e.PerCaller {
		return fmt.Sprintf("%v (this %s): it has %d approval states outstanding, its limit; each stays outstanding "+
			"for approvals.timeout (%s) after it was issued, answered or not, and other callers are not affected",
			ErrCallerBusy, e.Caller, e.Limit, e.TTL)
	}
	return fmt.Sprintf("%v: %d states of all callers within approvals.timeout (%s), the most this process remembers; "+
		"ask again once some have expired", ErrBusy, e.Limit, e.TTL)
}

// Is matches ErrBusy, and ErrCallerBusy for a caller's own share.
func (e *BusyError) Is(target error) bool {
	return target == ErrBusy || (e.PerCaller && target == ErrCallerBusy)
}

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
