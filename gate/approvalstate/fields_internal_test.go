package approvalstate

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
	"time"
)

// The AEAD's ciphertext is malleable bit for bit (GCM is a stream cipher
// under its tag): flipping ciphertext bit k flips plaintext bit k. This
// test uses that to aim at each bound part inside a state (tool, hash,
// caller, offer, expiry, nonce, payload), turning a digit or letter of its
// value into another, as an attacker who knew the layout would; the tag
// refuses every one.
func TestTamperEachBoundPart(t *testing.T) {
	now := time.Unix(1e9, 0)
	s, err := New(Options{Key: NewKey(), TTL: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	b := Binding{Tool: "shell.exec", Hash: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Caller: CredentialCaller([32]byte{9})}
	st, err := s.Seal(Request{Binding: b, Offer: OfferFor(b.Caller), Payload: []byte("downstream")})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(st)
	plain, err := s.aeads[s.current].Open(nil, nil, raw[headerSize:], additional(raw[:headerSize]))
	if err != nil {
		t.Fatal(err)
	}
	const gcmNonce = 12
	for _, part := range []struct {
		name  string
		field string
		xor   byte
	}{
		{"tool", `"t":"`, 's' ^ 'S'},
		{"call hash", `"h":"`, '0' ^ '1'},
		{"caller", `"c":"`, 0x01},
		{"offer (once, deny → once, session, deny)", `"o":`, '5' ^ '7'},
		{"expiry", `"e":`, '1' ^ '9'},
		{"nonce", `"n":"`, 0x01},
		{"payload", `"p":"`, 0x01},
	} {
		at := bytes.Index(plain, []byte(part.field))
		if at < 0 {
			t.Fatalf("%s: no %s in %s", part.name, part.field, plain)
		}
		at += len(part.field)
		m := append([]byte(nil), raw...)
		m[headerSize+gcmNonce+at] ^= part.xor
		if _, err := s.Open(base64.RawURLEncoding.EncodeToString(m), b); !errors.Is(err, ErrTampered) {
			t.Errorf("%s changed: %v", part.name, err)
		}
	}
	if a, err := s.Open(st, b); err != nil || a.Offer != OfferFor(b.Caller) {
		t.Fatalf("the untouched state: %+v %v", a, err)
	}
}
