package framing

import (
	"io"
	"sync"
)

// pending counts the requests a Stream has handed to its reader whose
// responses are not written yet: what the server owes its client. The
// reader waits while the count is at the Stream's bound, so a client that
// stops reading its output is no longer read either (back-pressure), and
// what the server holds for it stays bounded.
//
// It has its own lock, not the write lock: a write blocked on a client that
// does not read holds the write lock, and must not stop the reader from
// seeing that there is room.
type pending struct {
	mu     sync.Mutex
	room   sync.Cond // signalled when n falls or the output closes
	n      int
	closed bool // the output is closed: nothing owed will ever be written
}

func (p *pending) init() { p.room.L = &p.mu }

// add counts k more requests handed to the reader.
func (p *pending) add(k int) {
	p.mu.Lock()
	p.n += k
	p.mu.Unlock()
}

// done counts k requests answered (written) or never to be answered
// (skipped), and wakes the reader.
func (p *pending) done(k int) {
	if k <= 0 {
		return
	}
	p.mu.Lock()
	// Never below zero: a response nobody counted (there should be none)
	// must not buy a client extra room.
	p.n = max(p.n-k, 0)
	p.mu.Unlock()
	p.room.Broadcast()
}

// wait returns at once while fewer than limit requests are owed (always
// when limit is 0: no bound). At the limit it waits until at most resume
// are owed: resuming at the first free slot would read one request per
// answer written, and write one answer per syscall, for as long as the
// client lags. It returns io.ErrClosedPipe once the output is closed,
// since then nothing owed can be written and waiting would never end.
func (p *pending) wait(limit, resume int) error {
	if limit <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n >= limit {
		for p.n > resume && !p.closed {
			p.room.Wait()
		}
	}
	if p.closed {
		return io.ErrClosedPipe
	}
	return nil
}

// close wakes a waiting reader for good: the output has closed.
func (p *pending) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.room.Broadcast()
}

// count is how many requests are owed.
func (p *pending) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
