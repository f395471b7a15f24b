package limits

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"troupe/identity"
)

// clock is a hand-moved clock for the store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)} }

func TestTakeBurstThenRefill(t *testing.T) {
	c := newClock()
	s := NewLocalClock(c.now)
	for i := range 3 {
		if ok, _ := s.Take("k", 3); !ok {
			t.Fatalf("call %d of a burst of 3 refused", i+1)
		}
	}
	ok, wait := s.Take("k", 3)
	if ok || wait != 20*time.Second {
		t.Fatalf("4th call: ok=%v wait=%v, want refused for 20s (3/min refills one per 20 s)", ok, wait)
	}
	c.add(19 * time.Second)
	if ok, wait := s.Take("k", 3); ok || wait != time.Second {
		t.Fatalf("after 19 s: ok=%v wait=%v, want refused for 1s", ok, wait)
	}
	c.add(time.Second)
	if ok, _ := s.Take("k", 3); !ok {
		t.Fatal("after 20 s: refused, want one call refilled")
	}
	// Another key has its own bucket.
	if ok, _ := s.Take("other", 3); !ok {
		t.Fatal("another key was refused")
	}
	// No bound takes nothing.
	for range 100 {
		if ok, _ := s.Take("free", 0); !ok {
			t.Fatal("a key without a bound was refused")
		}
	}
}

func TestTakeNeverRefillsPastBurst(t *testing.T) {
	c := newClock()
	s := NewLocalClock(c.now)
	s.Take("k", 2)
	c.add(time.Hour)
	n := 0
	for {
		if ok, _ := s.Take("k", 2); !ok {
			break
		}
		n++
	}
	if n != 2 {
		t.Fatalf("after an hour idle %d calls passed, want the burst of 2", n)
	}
}

func TestAcquireRelease(t *testing.T) {
	s := NewLocal()
	if !s.Acquire("k", 2) || !s.Acquire("k", 2) {
		t.Fatal("two slots of 2 refused")
	}
	if s.Acquire("k", 2) {
		t.Fatal("third slot of 2 given")
	}
	s.Release("k")
	if !s.Acquire("k", 2) {
		t.Fatal("a released slot was not given again")
	}
	s.Release("k")
	s.Release("k")
	s.Release("k") // one too many: ignored, not negative
	if _, slots := s.size(); slots != 0 {
		t.Fatalf("%d slot counts left after every slot was released, want 0", slots)
	}
	if !s.Acquire("k", 1) || s.Acquire("k", 1) {
		t.Fatal("an extra release made room beyond the bound")
	}
}

// TestLocalForgets: random identities passing by do not grow the store
// without bound; buckets that refilled are swept, counts at zero deleted.
func TestLocalForgets(t *testing.T) {
	c := newClock()
	s := NewLocalClock(c.now)
	for i := range 100_000 {
		key := fmt.Sprintf("oauth:iss\x00user-%d\x00rate", i)
		s.Take(key, 60)
		s.Acquire(key+"calls", 4)
		s.Release(key + "calls")
		c.add(10 * time.Millisecond) // 1000 s in all: each bucket is full again within 1 s
	}
	buckets, slots := s.size()
	if slots != 0 {
		t.Fatalf("%d slot counts kept, want 0", slots)
	}
	if buckets > 2*minSweep {
		t.Fatalf("%d buckets kept for 100000 passing identities, want at most %d", buckets, 2*minSweep)
	}
}

func TestLimiterRateAndTools(t *testing.T) {
	c := newClock()
	ci := &identity.Identity{Kind: identity.Token, Name: "ci"}
	other := &identity.Identity{Kind: identity.Token, Name: "other"}
	l := NewLimiter(NewLocalClock(c.now), Rules{Default: Limits{CallsPerMinute: 5, Tools: map[string]int{"repo.*": 2}}})
	for i := range 2 {
		if _, over := l.Call(ci, "repo.readFile"); over != nil {
			t.Fatalf("repo call %d: %v", i+1, over)
		}
	}
	_, over := l.Call(ci, "repo.listDir")
	if over == nil || over.Key != `limits.rate.tools."repo.*"` || !strings.Contains(over.Error(), "2 calls per minute of repo.*") {
		t.Fatalf("third repo.* call: %v, want refused by the glob's bound", over)
	}
	if over.RetryAfterSeconds() != 30 {
		t.Fatalf("retry after %d s, want 30 (2 per minute)", over.RetryAfterSeconds())
	}
	// Other tools still pass until the identity's own rate is used up.
	for i := range 3 {
		if _, over := l.Call(ci, "shell.exec"); over != nil {
			t.Fatalf("other tool call %d: %v", i+1, over)
		}
	}
	_, over = l.Call(ci, "")
	if over == nil || over.Key != "limits.rate.calls_per_minute" || over.Identity != "token:ci" {
		t.Fatalf("6th call: %v, want refused by calls_per_minute", over)
	}
	if !strings.HasPrefix(over.Error(), "rate limited: token:ci is over its limit of 5 calls per minute (limits.rate.calls_per_minute); retry in 12 s") {
		t.Fatalf("message %q", over.Error())
	}
	// Another identity is unaffected.
	if _, over := l.Call(other, "repo.readFile"); over != nil {
		t.Fatalf("another identity refused: %v", over)
	}
	// A reload applies to later calls.
	l.Set(Rules{Default: Limits{CallsPerMinute: 100}})
	if _, over := l.Call(ci, "repo.readFile"); over != nil {
		t.Fatalf("after the reload raised the bound: %v", over)
	}
}

func TestLimiterTokenOverrides(t *testing.T) {
	ci := &identity.Identity{Kind: identity.Token, Name: "ci"}
	oauthCI := &identity.Identity{Kind: identity.OAuth, Issuer: "https://id", Name: "ci"}
	l := NewLimiter(NewLocal(), Rules{
		Default: Limits{CallsPerMinute: 1, MaxConcurrentCalls: 5, Tools: map[string]int{"a.*": 1, "b.*": 1}},
		Tokens:  map[string]Limits{"ci": {CallsPerMinute: 100, Tools: map[string]int{"a.*": 50}}},
	})
	for i := range 10 {
		release, over := l.Call(ci, "a.x")
		if over != nil {
			t.Fatalf("ci's call %d of a.x: %v (its own bound is 50)", i+1, over)
		}
		release()
	}
	release, _ := l.Call(ci, "b.x")
	release()
	if _, over := l.Call(ci, "b.x"); over == nil || over.Key != `limits.rate.tools."b.*"` {
		t.Fatalf("ci's second b.x: %v, want the server's b.* bound (the token names only a.*)", over)
	}
	// An OAuth subject named like the token is not the token.
	release, _ = l.Call(oauthCI, "")
	release()
	if _, over := l.Call(oauthCI, ""); over == nil || over.Key != "limits.rate.calls_per_minute" {
		t.Fatalf("oauth subject ci: %v, want the server's bound", over)
	}
	l.Set(Rules{Tokens: map[string]Limits{"ci": {CallsPerMinute: 1}}})
	if _, over := l.Call(ci, ""); over == nil || !strings.Contains(over.Key, `auth.tokens[name="ci"].rate.calls_per_minute`) {
		t.Fatalf("ci over its own bound: %v, want the token's key named", over)
	}
}

func TestLimiterConcurrencyAndSessions(t *testing.T) {
	l := NewLimiter(NewLocal(), Rules{Default: Limits{MaxConcurrentCalls: 2, MaxSessions: 1, CallsPerMinute: 1000}})
	var who *identity.Identity // stdio's local user
	r1, _ := l.Call(who, "t")
	r2, _ := l.Call(who, "t")
	if _, over := l.Call(who, "t"); over == nil || over.Key != "limits.identity.max_concurrent_calls" || over.Identity != "local" {
		t.Fatalf("third concurrent call: %v", over)
	}
	r1()
	r1() // twice: frees one slot only
	r3, over := l.Call(who, "t")
	if over != nil {
		t.Fatalf("after one ended: %v", over)
	}
	if _, over := l.Call(who, "t"); over == nil {
		t.Fatal("a doubled release freed a second slot")
	}
	r2()
	r3()

	a := &identity.Identity{Kind: identity.Token, Name: "a"}
	s1, over := l.Session(a)
	if over != nil {
		t.Fatal(over)
	}
	if _, over := l.Session(a); over == nil || over.Key != "limits.identity.max_sessions" {
		t.Fatalf("second session: %v", over)
	}
	if _, over := l.Session(&identity.Identity{Kind: identity.Token, Name: "b"}); over != nil {
		t.Fatalf("another identity's session: %v", over)
	}
	s1()
	if _, over := l.Session(a); over != nil {
		t.Fatalf("after the session ended: %v", over)
	}
}

// TestLimiterRefusalHoldsNoSlot: a call refused by a rate gives back the
// concurrency slot it took first.
func TestLimiterRefusalHoldsNoSlot(t *testing.T) {
	l := NewLimiter(NewLocal(), Rules{Default: Limits{MaxConcurrentCalls: 1, CallsPerMinute: 1}})
	r, _ := l.Call(nil, "")
	r()
	if _, over := l.Call(nil, ""); over == nil || over.Key != "limits.rate.calls_per_minute" {
		t.Fatalf("second call: %v, want refused by the rate", over)
	}
	l.Set(Rules{Default: Limits{MaxConcurrentCalls: 1}})
	if _, over := l.Call(nil, ""); over != nil {
		t.Fatalf("the refused call kept its slot: %v", over)
	}
}

// BenchmarkCallUnlimited is the cost every counted request pays when no
// limit is configured: it must not allocate.
func BenchmarkCallUnlimited(b *testing.B) {
	l := NewLimiter(NewLocal(), Rules{})
	who := &identity.Identity{Kind: identity.Token, Name: "ci"}
	b.ReportAllocs()
	for b.Loop() {
		release, _ := l.Call(who, "repo.readFile")
		release()
	}
}

// Every refusal reaches OnExceeded's function, naming the identity and
// the kind of limit; a request let through does not.
func TestLimiterTellsOfRefusals(t *testing.T) {
	l := NewLimiter(NewLocal(), Rules{Default: Limits{CallsPerMinute: 1, MaxSessions: 1, MaxConcurrentCalls: 5,
		Tools: map[string]int{"shell.*": 1}}})
	var got []string
	l.OnExceeded(func(e *Exceeded) { got = append(got, e.Identity+" "+e.Limit) })
	a := &identity.Identity{Kind: identity.Token, Name: "a"}
	release, _ := l.Call(a, "repo.read")
	release()
	if len(got) != 0 {
		t.Fatalf("a call let through was reported: %v", got)
	}
	_, _ = l.Call(a, "repo.read")
	b := &identity.Identity{Kind: identity.Token, Name: "b"}
	release, _ = l.Call(b, "shell.exec")
	release()
	_, _ = l.Call(b, "shell.exec")
	_, _ = l.Session(a)
	_, _ = l.Session(a)
	want := []string{"token:a " + LimitCallsPerMinute, "token:b " + LimitToolCallsPerMinute, "token:a " + LimitSessions}
	if !slices.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
}
