package approvalstate_test

import (
	"encoding/base64"
	"testing"
	"time"

	"troupe/gate/approvalstate"
)

// FuzzOpen: Open never panics, whatever it is given, and never accepts a
// state that differs from one troupe sealed, in any byte or length; the
// state itself still opens once afterwards.
func FuzzOpen(f *testing.F) {
	c := &clock{t: time.Unix(1e9, 0)}
	key := approvalstate.NewKey()
	b := binding(call(`{"command":["touch","marker"]}`), alice)
	used := newSealer(f, c, key)
	replayed := seal(f, used, b)
	if _, err := used.Open(replayed, b); err != nil {
		f.Fatal(err)
	}
	f.Add("", uint16(0), byte(1), "")
	f.Add(replayed, uint16(3), byte(0x80), "")
	f.Add("AQAAAAA", uint16(40), byte(0xff), "AAAA")
	f.Add("not a state", uint16(7), byte(0), "=")
	f.Fuzz(func(t *testing.T, arbitrary string, at uint16, xor byte, tail string) {
		if a, err := used.Open(arbitrary, b); err == nil {
			t.Fatalf("an arbitrary string opened: %q → %+v", arbitrary, a)
		}
		s := newSealer(t, c, key) // a fresh replay cache, the same key
		st := seal(t, s, b)
		raw, _ := base64.RawURLEncoding.DecodeString(st)
		raw[int(at)%len(raw)] ^= xor
		for _, m := range []string{base64.RawURLEncoding.EncodeToString(raw) + tail, st + tail, tail + st} {
			if m == st {
				continue
			}
			if a, err := s.Open(m, b); err == nil {
				t.Fatalf("a modified state opened: %q → %+v", m, a)
			}
		}
		if _, err := s.Open(st, b); err != nil {
			t.Fatalf("the state itself: %v", err)
		}
	})
}
