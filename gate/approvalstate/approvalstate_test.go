package approvalstate_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"troupe/gate"
	"troupe/gate/approvalstate"
	"troupe/tools"
)

// clock is a settable clock for the Sealer (states carry wall-clock
// expiries; the tests move time instead of waiting).
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

const ttl = 5 * time.Minute

func newSealer(t testing.TB, c *clock, key approvalstate.Key, previous ...approvalstate.Key) *approvalstate.Sealer {
	t.Helper()
	s, err := approvalstate.New(approvalstate.Options{Key: key, Previous: previous, TTL: ttl, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// call is a shell.exec call as the gate hashes it.
func call(args string) gate.Call {
	return gate.Call{
		Spec:      tools.Spec{Name: "shell.exec", Safety: tools.Safety{HighRisk: true, RequiresApproval: true, SandboxProfile: "default"}},
		Arguments: json.RawMessage(args),
		Preview:   &tools.Preview{Cwd: ".", Env: map[string]string{"MODE": "x"}, Command: []string{"touch", "marker"}},
	}
}

func binding(c gate.Call, caller approvalstate.Caller) approvalstate.Binding {
	return approvalstate.Binding{Tool: c.Spec.Name, Hash: gate.Hash(c), Caller: caller}
}

var (
	alice = approvalstate.CredentialCaller([32]byte{1})
	bob   = approvalstate.CredentialCaller([32]byte{2})
	stdio = approvalstate.ConnectionCaller("conn-7f3a")
)

func seal(t testing.TB, s *approvalstate.Sealer, b approvalstate.Binding) string {
	t.Helper()
	st, err := s.Seal(approvalstate.Request{Binding: b, Offer: approvalstate.OfferFor(b.Caller), Payload: []byte("downstream-state")})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSealOpenRoundTrip(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	s := newSealer(t, c, approvalstate.NewKey())
	b := binding(call(`{"command":["touch","marker"]}`), alice)
	st := seal(t, s, b)
	raw, err := base64.RawURLEncoding.DecodeString(st)
	if err != nil {
		t.Fatalf("the state is not base64url: %v", err)
	}
	for _, leak := range []string{"shell.exec", b.Hash[:16], "downstream-state"} {
		if strings.Contains(string(raw), leak) || strings.Contains(st, leak) {
			t.Errorf("the state shows %q in the clear", leak)
		}
	}
	c.advance(ttl - time.Millisecond)
	a, err := s.Open(st, b)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if a.Tool != "shell.exec" || a.Hash != b.Hash || string(a.Payload) != "downstream-state" ||
		!a.Expires.Equal(c.t.Add(time.Millisecond)) || a.Offer != approvalstate.OfferFor(alice) {
		t.Fatalf("opened: %+v", a)
	}
	if d, err := a.Choose("once"); err != nil || d != approvalstate.Once {
		t.Errorf("choose once: %v %v", d, err)
	}
	if d, err := a.Choose("deny"); err != nil || d != approvalstate.Deny {
		t.Errorf("choose deny: %v %v", d, err)
	}
	for _, answer := range []string{"session", "always", ""} {
		if _, err := a.Choose(answer); !errors.Is(err, approvalstate.ErrNotOffered) {
			t.Errorf("choose %q on an HTTP state: %v", answer, err)
		}
	}
}

// "For this session" is offered to a stdio connection only.
func TestOfferFor(t *testing.T) {
	if o := approvalstate.OfferFor(stdio); !o.Has(approvalstate.Session) || !o.Has(approvalstate.Once) || !o.Has(approvalstate.Deny) {
		t.Errorf("stdio offer: %s", o)
	}
	if o := approvalstate.OfferFor(alice); o.Has(approvalstate.Session) || o.String() != "once, deny" {
		t.Errorf("HTTP offer: %s", o)
	}
	c := &clock{t: time.Unix(1e9, 0)}
	s := newSealer(t, c, approvalstate.NewKey())
	b := binding(call(`{}`), stdio)
	a, err := s.Open(seal(t, s, b), b)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := a.Choose("session"); err != nil || d != approvalstate.Session {
		t.Errorf("choose session on a stdio state: %v %v", d, err)
	}
}

// Every refusal is distinct and says what is wrong; none of them uses up
// the state, which still opens for its own call afterwards.
func TestRefusals(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	key := approvalstate.NewKey()
	s := newSealer(t, c, key)
	base := call(`{"command":["touch","marker"]}`)
	b := binding(base, alice)
	st := seal(t, s, b)

	otherArgs := binding(call(`{"command":["touch","other"]}`), alice)
	otherCwd := base
	otherCwd.Preview = &tools.Preview{Cwd: "sub", Env: base.Preview.Env, Command: base.Preview.Command}
	otherEnv := base
	otherEnv.Preview = &tools.Preview{Cwd: ".", Env: map[string]string{"MODE": "y"}, Command: base.Preview.Command}
	otherProfile := base
	otherProfile.Spec.Safety.SandboxProfile = "none"
	otherTool := base
	otherTool.Spec.Name = "fs.writeFile"
	foreign := seal(t, newSealer(t, c, approvalstate.NewKey()), b)
	raw, _ := base64.RawURLEncoding.DecodeString(st)
	truncated := base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1])
	extended := base64.RawURLEncoding.EncodeToString(append(raw[:len(raw):len(raw)], 0))

	cases := []struct {
		name  string
		state string
		b     approvalstate.Binding
		want  error
		says  string
	}{
		{"another credential", st, binding(base, bob), approvalstate.ErrOtherCaller, "another caller"},
		{"a stdio connection", st, binding(base, stdio), approvalstate.ErrOtherCaller, "another caller"},
		{"no caller", st, binding(base, approvalstate.Caller{}), approvalstate.ErrOtherCaller, "another caller"},
		{"other arguments", st, otherArgs, approvalstate.ErrOtherCall, "other arguments"},
		{"other working directory", st, binding(otherCwd, alice), approvalstate.ErrOtherCall, "working directory"},
		{"other environment", st, binding(otherEnv, alice), approvalstate.ErrOtherCall, "environment"},
		{"other sandbox profile", st, binding(otherProfile, alice), approvalstate.ErrOtherCall, "sandbox profile"},
		{"other tool", st, binding(otherTool, alice), approvalstate.ErrOtherTool, `issued for "shell.exec", presented with "fs.writeFile"`},
		{"another server's key", foreign, b, approvalstate.ErrUnknownKey, "key this server does not hold"},
		{"empty", "", b, approvalstate.ErrMalformed, "too short"},
		{"not base64url", "not a state!", b, approvalstate.ErrMalformed, "not base64url"},
		{"with a line break", st[:10] + "\n" + st[10:], b, approvalstate.ErrMalformed, "not base64url"},
		{"padded", st + "=", b, approvalstate.ErrMalformed, "malformed"},
		{"standard alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(st) + "+", b, approvalstate.ErrMalformed, "malformed"},
		{"huge", strings.Repeat("A", 1<<20), b, approvalstate.ErrMalformed, "more than any state"},
		{"truncated", truncated, b, approvalstate.ErrTampered, "modified or forged"},
		{"extended", extended, b, approvalstate.ErrTampered, "modified or forged"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := s.Open(tc.state, tc.b)
			if a != nil || !errors.Is(err, tc.want) {
				t.Fatalf("got %+v, %v; want %v", a, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
		})
	}
	if _, err := s.Open(st, b); err != nil {
		t.Fatalf("after the refusals the state does not open for its own call: %v", err)
	}
	if _, err := s.Open(st, b); !errors.Is(err, approvalstate.ErrReplayed) || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("a used state opens again: %v", err)
	}
}

func TestExpired(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	s := newSealer(t, c, approvalstate.NewKey())
	b := binding(call(`{}`), alice)
	st := seal(t, s, b)
	c.advance(ttl)
	_, err := s.Open(st, b)
	if !errors.Is(err, approvalstate.ErrExpired) || !strings.Contains(err.Error(), "approvals.timeout is 5m0s") {
		t.Fatalf("at its expiry: %v", err)
	}
	c.advance(time.Hour)
	if _, err := s.Open(st, b); !errors.Is(err, approvalstate.ErrExpired) {
		t.Fatalf("an hour later: %v", err)
	}
	if s.Outstanding() != 0 {
		t.Fatalf("an expired state was remembered: %d", s.Outstanding())
	}
}

// Every bit of a state is covered: flipping any one is refused, with the
// error of the part it lands in (format version, key id, then the AEAD's
// nonce, ciphertext and tag), and never uses the state up.
func TestTamperedByteRefused(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	s := newSealer(t, c, approvalstate.NewKey())
	b := binding(call(`{"command":["touch","marker"]}`), alice)
	st := seal(t, s, b)
	raw, _ := base64.RawURLEncoding.DecodeString(st)
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			m := append([]byte(nil), raw...)
			m[i] ^= bit
			_, err := s.Open(base64.RawURLEncoding.EncodeToString(m), b)
			var want error
			switch {
			case i == 0:
				want = approvalstate.ErrMalformed
			case i < 5:
				want = approvalstate.ErrUnknownKey
			default:
				want = approvalstate.ErrTampered
			}
			if !errors.Is(err, want) {
				t.Fatalf("byte %d ^ %#x: %v, want %v", i, bit, err, want)
			}
		}
	}
	if _, err := s.Open(st, b); err != nil {
		t.Fatalf("the untouched state: %v", err)
	}
}

// A previous key opens the states it sealed; new states use the current
// key; a key no longer listed opens nothing.
func TestRotation(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	oldKey, newKey := approvalstate.NewKey(), approvalstate.NewKey()
	before := newSealer(t, c, oldKey)
	b := binding(call(`{}`), alice)
	sealedBefore := seal(t, before, b)
	sealedBefore2 := seal(t, before, b)

	during := newSealer(t, c, newKey, oldKey)
	if _, err := during.Open(sealedBefore, b); err != nil {
		t.Fatalf("a state sealed under the previous key: %v", err)
	}
	sealedDuring := seal(t, during, b)
	if _, err := before.Open(sealedDuring, b); !errors.Is(err, approvalstate.ErrUnknownKey) {
		t.Fatalf("a state sealed during the rotation opened under the old key alone: %v", err)
	}
	after := newSealer(t, c, newKey)
	if _, err := after.Open(sealedDuring, b); err != nil {
		t.Fatalf("after the rotation, a state sealed under the current key: %v", err)
	}
	if _, err := after.Open(sealedBefore2, b); !errors.Is(err, approvalstate.ErrUnknownKey) {
		t.Fatalf("after the rotation, a state of the dropped key: %v", err)
	}
	if _, err := approvalstate.New(approvalstate.Options{Key: newKey, Previous: []approvalstate.Key{oldKey, newKey}, TTL: ttl}); err == nil ||
		!strings.Contains(err.Error(), "previous key 2 is the same as another key") {
		t.Fatalf("a key listed twice: %v", err)
	}
	if _, err := approvalstate.New(approvalstate.Options{Key: newKey}); err == nil || !strings.Contains(err.Error(), "expiry must be positive") {
		t.Fatalf("no TTL: %v", err)
	}
}

// The memory of states forgets expired ones first and, full of live ones,
// refuses to seal rather than forget: it never grows past its bound and
// never lets a live state open twice.
func TestOutstandingBound(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	s, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: ttl, MaxOutstanding: 3, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	b := binding(call(`{}`), alice)
	s1, s2 := seal(t, s, b), seal(t, s, b)
	c.advance(ttl / 2)
	s3 := seal(t, s, b)
	c.advance(ttl/2 - time.Second)
	if _, err := s.Seal(approvalstate.Request{Binding: b, Offer: approvalstate.OfferFor(alice)}); !errors.Is(err, approvalstate.ErrBusy) ||
		!strings.Contains(err.Error(), "3 approval states outstanding") {
		t.Fatalf("a fourth live state with room for three: %v", err)
	}
	for _, st := range []string{s1, s2, s3} {
		if _, err := s.Open(st, b); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Outstanding(); n != 3 {
		t.Fatalf("remembered %d, want 3", n)
	}
	c.advance(time.Second) // s1 and s2 expire; s3 is live
	s4 := seal(t, s, b)
	if n := s.Outstanding(); n != 2 {
		t.Fatalf("remembered %d, want 2 (s3, s4)", n)
	}
	if _, err := s.Open(s4, b); err != nil {
		t.Fatalf("with the expired nonces gone: %v", err)
	}
	for _, st := range []string{s3, s4} {
		if _, err := s.Open(st, b); !errors.Is(err, approvalstate.ErrReplayed) {
			t.Fatalf("a live used state opened again: %v", err)
		}
	}
	// Many states over time: the memory never holds more than its bound.
	for i := range 1000 {
		st, err := s.Seal(approvalstate.Request{Binding: b, Offer: approvalstate.OfferFor(alice)})
		if err == nil {
			_, err = s.Open(st, b)
		}
		if err != nil && !errors.Is(err, approvalstate.ErrBusy) {
			t.Fatal(err)
		}
		if n := s.Outstanding(); n > 3 {
			t.Fatalf("after %d states the memory holds %d", i, n)
		}
		c.advance(ttl / 7)
	}
}

// A caller with its share of states outstanding is refused alone, with an
// error that says it is that caller's limit; other callers seal and open
// as before. Answering (here: denying) its own states frees nothing before
// they expire, so churning them mints nothing beyond the share.
func TestPerCallerShare(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	s, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: ttl, MaxPerCaller: 3, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ba, bb, bs := binding(call(`{}`), alice), binding(call(`{}`), bob), binding(call(`{}`), stdio)
	var mine []string
	for range 3 {
		mine = append(mine, seal(t, s, ba))
	}
	_, err = s.Seal(approvalstate.Request{Binding: ba, Offer: approvalstate.OfferFor(alice)})
	var busy *approvalstate.BusyError
	if !errors.Is(err, approvalstate.ErrCallerBusy) || !errors.Is(err, approvalstate.ErrBusy) || !errors.As(err, &busy) ||
		!busy.PerCaller || busy.Limit != 3 || !strings.Contains(err.Error(), "this credential") ||
		!strings.Contains(err.Error(), "its limit") || !strings.Contains(err.Error(), "other callers are not affected") {
		t.Fatalf("alice past her share: %v", err)
	}
	for _, b := range []approvalstate.Binding{bb, bs} {
		st := seal(t, s, b)
		if _, err := s.Open(st, b); err != nil {
			t.Fatalf("%s beside a caller at its limit: %v", b.Caller, err)
		}
	}
	// Alice answers her states (a "deny" opens them as any answer does)
	// and asks again: still refused until they expire.
	for _, st := range mine {
		if _, err := s.Open(st, ba); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Seal(approvalstate.Request{Binding: ba, Offer: approvalstate.OfferFor(alice)}); !errors.Is(err, approvalstate.ErrCallerBusy) {
			t.Fatalf("alice churned an answered state into a new one: %v", err)
		}
	}
	if n := s.OutstandingFor(alice); n != 3 {
		t.Fatalf("alice has %d outstanding, want her share of 3", n)
	}
	for _, st := range mine {
		if _, err := s.Open(st, ba); !errors.Is(err, approvalstate.ErrReplayed) {
			t.Fatalf("an answered state opened again: %v", err)
		}
	}
	c.advance(ttl)
	if n := s.OutstandingFor(alice); n != 0 {
		t.Fatalf("alice has %d outstanding after they all expired", n)
	}
	st := seal(t, s, ba)
	if _, err := s.Open(st, ba); err != nil {
		t.Fatalf("alice once her states expired: %v", err)
	}
}

// The total bound caps every caller's states together; it says so, not
// that the caller is at its own limit.
func TestTotalBound(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	s, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: ttl, MaxPerCaller: 2, MaxOutstanding: 4, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []approvalstate.Caller{alice, alice, bob, bob} {
		seal(t, s, binding(call(`{}`), who))
	}
	_, err = s.Seal(approvalstate.Request{Binding: binding(call(`{}`), stdio), Offer: approvalstate.OfferFor(stdio)})
	if !errors.Is(err, approvalstate.ErrBusy) || errors.Is(err, approvalstate.ErrCallerBusy) || !strings.Contains(err.Error(), "all callers") {
		t.Fatalf("past the total: %v", err)
	}
	if _, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: ttl, MaxPerCaller: -1}); err == nil {
		t.Fatal("a negative share was accepted")
	}
}

// Check verifies a state as Open does and uses nothing up: a retry that
// brings no answer, however often, adds no state and leaves the state to
// open once afterwards; a state already used, or not the caller's, is
// refused as Open refuses it.
func TestCheckSpendsNothing(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	s, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: ttl, MaxPerCaller: 2, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	b := binding(call(`{}`), alice)
	st := seal(t, s, b)
	for range 100 {
		a, err := s.Check(st, b)
		if err != nil || string(a.Payload) != "downstream-state" {
			t.Fatalf("check: %+v %v", a, err)
		}
	}
	if n := s.OutstandingFor(alice); n != 1 {
		t.Fatalf("100 checks left alice %d states outstanding, want 1", n)
	}
	if _, err := s.Check(st, binding(call(`{}`), bob)); !errors.Is(err, approvalstate.ErrOtherCaller) {
		t.Fatalf("checked by another caller: %v", err)
	}
	if _, err := s.Open(st, b); err != nil {
		t.Fatalf("opened after the checks: %v", err)
	}
	if _, err := s.Check(st, b); !errors.Is(err, approvalstate.ErrReplayed) {
		t.Fatalf("checked once used: %v", err)
	}
	c.advance(ttl)
	if _, err := s.Check(st, b); !errors.Is(err, approvalstate.ErrExpired) {
		t.Fatalf("checked once expired: %v", err)
	}

	// A state another process sealed (a shared key) is remembered here
	// when it opens, against its caller's share, and not when checked.
	key := approvalstate.NewKey()
	p1 := newSealer(t, c, key)
	p2, err := approvalstate.New(approvalstate.Options{Key: key, TTL: ttl, MaxPerCaller: 2, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	foreign := []string{seal(t, p1, b), seal(t, p1, b), seal(t, p1, b)}
	for _, st := range foreign {
		if _, err := p2.Check(st, b); err != nil {
			t.Fatal(err)
		}
	}
	if n := p2.Outstanding(); n != 0 {
		t.Fatalf("checks of foreign states left %d remembered", n)
	}
	for _, st := range foreign[:2] {
		if _, err := p2.Open(st, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p2.Open(foreign[2], b); !errors.Is(err, approvalstate.ErrCallerBusy) {
		t.Fatalf("a foreign state past the caller's share: %v", err)
	}
	bs := binding(call(`{}`), stdio)
	if _, err := p2.Open(seal(t, p1, bs), bs); err != nil {
		t.Fatalf("another caller's foreign state: %v", err)
	}
}

func TestSealRefusesUnboundStates(t *testing.T) {
	s := newSealer(t, &clock{t: time.Unix(1e9, 0)}, approvalstate.NewKey())
	b := binding(call(`{}`), alice)
	for name, r := range map[string]approvalstate.Request{
		"no caller":     {Binding: approvalstate.Binding{Tool: b.Tool, Hash: b.Hash}, Offer: approvalstate.OfferFor(alice)},
		"empty stdio":   {Binding: approvalstate.Binding{Tool: b.Tool, Hash: b.Hash, Caller: approvalstate.ConnectionCaller("")}, Offer: approvalstate.OfferFor(alice)},
		"no hash":       {Binding: approvalstate.Binding{Tool: b.Tool, Caller: alice}, Offer: approvalstate.OfferFor(alice)},
		"no offer":      {Binding: b},
		"big payload":   {Binding: b, Offer: approvalstate.OfferFor(alice), Payload: make([]byte, approvalstate.MaxPayload+1)},
		"unknown offer": {Binding: b, Offer: 0x80},
	} {
		if st, err := s.Seal(r); err == nil {
			t.Errorf("%s: sealed %q", name, st)
		}
	}
	if _, err := s.Seal(approvalstate.Request{Binding: b, Offer: approvalstate.OfferFor(alice), Payload: make([]byte, approvalstate.MaxPayload)}); err != nil {
		t.Errorf("the largest payload: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	var k approvalstate.Key
	for i := range k {
		k[i] = byte(i * 7)
	}
	for _, text := range []string{
		base64.StdEncoding.EncodeToString(k[:]),
		base64.RawStdEncoding.EncodeToString(k[:]),
		base64.URLEncoding.EncodeToString(k[:]),
		base64.RawURLEncoding.EncodeToString(k[:]),
		hex.EncodeToString(k[:]),
		strings.ToUpper(hex.EncodeToString(k[:])),
		" " + base64.StdEncoding.EncodeToString(k[:]) + "\n",
	} {
		got, err := approvalstate.ParseKey(text)
		if err != nil || got != k {
			t.Errorf("ParseKey(%q) = %x, %v", text, got, err)
		}
	}
	short := base64.StdEncoding.EncodeToString(k[:31])
	if _, err := approvalstate.ParseKey(short); err == nil || !strings.Contains(err.Error(), "must be 32 bytes, got 31") ||
		strings.Contains(err.Error(), short) {
		t.Errorf("31 bytes: %v", err)
	}
	if _, err := approvalstate.ParseKey("correct horse battery staple!"); err == nil ||
		!strings.Contains(err.Error(), "neither base64 nor hex") || strings.Contains(err.Error(), "horse") {
		t.Errorf("a passphrase: %v", err)
	}
	if _, err := approvalstate.ParseKey(""); err == nil {
		t.Error("an empty key parsed")
	}
}

// Presented many times at once, a state opens exactly once.
func TestConcurrentRetriesOpenOnce(t *testing.T) {
	s := newSealer(t, &clock{t: time.Unix(1e9, 0)}, approvalstate.NewKey())
	b := binding(call(`{}`), alice)
	st := seal(t, s, b)
	var wg sync.WaitGroup
	var opened, replayed atomic.Int32
	for range 16 {
		wg.Go(func() {
			_, err := s.Open(st, b)
			switch {
			case err == nil:
				opened.Add(1)
			case errors.Is(err, approvalstate.ErrReplayed):
				replayed.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if opened.Load() != 1 || replayed.Load() != 15 {
		t.Fatalf("opened %d times, refused as replayed %d times", opened.Load(), replayed.Load())
	}
}
