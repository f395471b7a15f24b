package spool

import (
	"fmt"
	"sync/atomic"
)

// Budget is a number of spool-file bytes that stores draw on, safe for
// concurrent use. Every store has one of its own (Limits.MaxStoreBytes),
// and the stores of one server share another (Limits.Shared), so that
// neither a session nor all of them together can fill the disk: each
// stream's cap alone would let a session keep MaxOutputs × 2 streams.
// Bytes are taken before they are written and given back when their
// output is evicted or their store is closed.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes (max ≤ 0 means
// DefaultMaxTotalBytes).
func NewBudget(max int64) *Budget {
	if max <= 0 {
		max = DefaultMaxTotalBytes
	}
	return &Budget{max: max}
}

// Max is the budget's size in bytes.
func (b *Budget) Max() int64 { return b.max }

// Used is how many of its bytes spool files hold or are about to.
func (b *Budget) Used() int64 { return b.used.Load() }

// take reserves up to n bytes and says how many it got: fewer than n only
// when the budget is spent. Reservations are atomic, so concurrent
// writers can never take more than max between them.
func (b *Budget) take(n int64) int64 {
	for {
		used := b.used.Load()
		got := min(n, b.max-used)
		if got <= 0 {
			return 0
		}
		if b.used.CompareAndSwap(used, used+got) {
			return got
		}
	}
}

// give returns n bytes taken earlier.
func (b *Budget) give(n int64) {
	if n > 0 {
		b.used.Add(-n)
	}
}

// Cap names the limit that cut a stream's spool file short, so that the
// person reading the result knows which setting to change.
type Cap string

// The caps, from the narrowest to the widest. Each is named in the
// result's marker with the troupe setting that sets it.
const (
	// CapNone: the file holds every byte (or there is no file).
	CapNone Cap = ""
	// CapStream is Limits.MaxFileBytes (output.max_spool_bytes).
	CapStream Cap = "stream"
	// CapSession is Limits.MaxStoreBytes (output.max_session_spool_bytes).
	CapSession Cap = "session"
	// CapServer is Limits.Shared (output.max_total_spool_bytes).
	CapServer Cap = "server"
)

// reserve takes up to n bytes from the store's budget, then from the
// server's, and says how many it got and, when fewer than n, which cap
// gave less. What the server refuses goes back to the store.
func (s *Store) reserve(n int64) (int64, Cap) {
	got, cut := s.own.take(n), CapNone
	if got < n {
		cut = CapSession
	}
	if got > 0 && s.limits.Shared != nil {
		if shared := s.limits.Shared.take(got); shared < got {
			s.own.give(got - shared)
			got, cut = shared, CapServer
		}
	}
	return got, cut
}

// release gives back n bytes reserve took.
func (s *Store) release(n int64) {
	s.own.give(n)
	if s.limits.Shared != nil {
		s.limits.Shared.give(n)
	}
}

// Used is how many bytes the store's spool files hold (or are about to).
func (s *Store) Used() int64 { return s.own.Used() }

// capNote says, for a person, which cap was reached and which setting
// raises it.
func (s *Store) capNote(c Cap) string {
	switch c {
	case CapStream:
		return fmt.Sprintf("the spool limit of one stream was reached (output.max_spool_bytes = %d)", s.limits.MaxFileBytes)
	case CapSession:
		return fmt.Sprintf("the spool limit of this session was reached (output.max_session_spool_bytes = %d)", s.own.Max())
	case CapServer:
		return fmt.Sprintf("the spool limit of the whole server was reached (output.max_total_spool_bytes = %d)", s.limits.Shared.Max())
	}
	return "writing the spool file failed"
}
