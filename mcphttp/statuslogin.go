package mcphttp

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// statusLoginTTL is how long one login to the status page lasts: the
// cookie's Max-Age and the server's own expiry of it. A working day, so an
// operator logs in once a day and a cookie left in a browser dies on its
// own.
const statusLoginTTL = 12 * time.Hour

// maxStatusLogins bounds the logins kept at once. Logging in takes the
// bearer token, but whoever has it must still not be able to grow the
// server's memory by logging in again and again: past the bound the
// oldest login is forgotten (its cookie is refused), as if it had expired.
const maxStatusLogins = 64

// statusLogin is one login to the status page: the SHA-256 of its cookie's
// value (the value itself is not kept, so memory holds nothing a browser
// could present), the token it was made with, the identity that token
// was then (identity.Identity.Key: a reload that gives the token to
// another name ends the login), and when it expires.
type statusLogin struct {
	cookie  [32]byte
	token   [32]byte
	who     string
	expires time.Time
}

// statusLogins are the live logins to the status page, oldest first. The
// HTTP front's handlers call it concurrently, hence the lock. A cookie is
// good while its login is here, unexpired, and made with the token the
// server wants now: a new token (a reload) ends every login of the old one.
type statusLogins struct {
	mu     sync.Mutex
	now    func() time.Time // time.Now; tests move the clock
	logins []statusLogin    // in the order they were made, so expiry order too
}

// loginCheck is what statusLogins.check found for a cookie.
type loginCheck int

const (
	loginUnknown loginCheck = iota // never issued, forgotten, or of another token
	loginExpired                   // issued, but its lifetime is over
	loginValid
)

// add makes a new login for the token whose SHA-256 is token and returns
// its cookie's value: 32 bytes from crypto/rand, base64url.
func (s *statusLogins) add(token *[32]byte, who string) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	value := base64.RawURLEncoding.EncodeToString(raw[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	s.prune(now)
	if len(s.logins) >= maxStatusLogins {
		s.logins = append(s.logins[:0], s.logins[len(s.logins)-maxStatusLogins+1:]...)
	}
	s.logins = append(s.logins, statusLogin{cookie: sha256.Sum256([]byte(value)), token: *token, who: who,
		expires: now.Add(statusLoginTTL)})
	return value, nil
}

// check looks the cookie value up and returns the SHA-256 of the token its
// login was made with and the identity it was then (the caller checks
// that the token is still wanted, by the same identity: a reload that
// removes, changes or renames it ends its logins). Every kept login
// is compared in constant time, so the answer's timing says nothing about
// how close a guess came.
func (s *statusLogins) check(value string) (loginCheck, [32]byte, string) {
	sum := sha256.Sum256([]byte(value))
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	found := loginUnknown
	var token [32]byte
	var who string
	for _, l := range s.logins {
		if subtle.ConstantTimeCompare(l.cookie[:], sum[:]) != 1 {
			continue
		}
		found, token, who = loginValid, l.token, l.who
		if !now.Before(l.expires) {
			found = loginExpired
		}
	}
	// Expired logins are forgotten after the check, so that the one
	// presented now is still told apart from a forged cookie.
	s.prune(now)
	return found, token, who
}

// len is the number of logins kept.
func (s *statusLogins) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.logins)
}

// prune drops the expired logins; they are the oldest, so a prefix.
func (s *statusLogins) prune(now time.Time) {
	n := 0
	for n < len(s.logins) && !now.Before(s.logins[n].expires) {
		n++
	}
	if n > 0 {
		s.logins = append(s.logins[:0], s.logins[n:]...)
	}
}

func (s *statusLogins) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}
