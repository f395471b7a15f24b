package mcphttp

import (
	"sync"

	"troupe/actors/httptransport"
	"troupe/identity"
)

// sessionPool keeps the hidden sessions that served 2026-07-28 requests,
// per caller (the credential), for the caller's next requests: a request
// then costs no actor start, only the call itself. A session is pooled
// only once its request was answered (nothing of it runs any more); one
// whose client left before the answer is closed instead, which stops the
// call. Pooled sessions end like any HTTP session: idle expiry
// (http.session_idle_timeout), drain, shutdown; an ended one is dropped
// when it is next taken. The zero value is empty and ready.
type sessionPool struct {
	mu   sync.Mutex
	idle map[[32]byte][]*httptransport.Handle
}

// maxPooledPerCaller bounds the idle sessions kept per caller: about a
// client's usual concurrency, 1.5 KB each.
const maxPooledPerCaller = 8

// take is an idle session of caller's, nil when none is kept.
func (p *sessionPool) take(caller [32]byte) *httptransport.Handle {
	p.mu.Lock()
	defer p.mu.Unlock()
	for list := p.idle[caller]; len(list) > 0; list = p.idle[caller] {
		s := list[len(list)-1]
		list[len(list)-1] = nil
		p.idle[caller] = list[:len(list)-1]
		if len(p.idle[caller]) == 0 {
			delete(p.idle, caller)
		}
		if !s.Ended() {
			return s
		}
	}
	return nil
}

// put keeps s for caller's next request; false when the caller has
// maxPooledPerCaller kept already, or s has ended (the caller closes it).
func (p *sessionPool) put(caller [32]byte, s *httptransport.Handle) bool {
	if s.Ended() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[caller]) >= maxPooledPerCaller {
		return false
	}
	if p.idle == nil {
		p.idle = map[[32]byte][]*httptransport.Handle{}
	}
	p.idle[caller] = append(p.idle[caller], s)
	return true
}

// dropIf closes the pooled sessions whose identity gone says has left
// (a reload removed its token) and says how many it closed.
func (p *sessionPool) dropIf(gone func(*identity.Identity) bool) int {
	var closing []*httptransport.Handle
	p.mu.Lock()
	for caller, list := range p.idle {
		kept := list[:0]
		for _, s := range list {
			if gone(s.Identity()) {
				closing = append(closing, s)
			} else {
				kept = append(kept, s)
			}
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(p.idle, caller)
		} else {
			p.idle[caller] = kept
		}
	}
	p.mu.Unlock()
	for _, s := range closing {
		s.Close()
	}
	return len(closing)
}

// drop closes every pooled session (the handler stops taking requests).
func (p *sessionPool) drop() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, list := range idle {
		for _, s := range list {
			s.Close()
		}
	}
}
