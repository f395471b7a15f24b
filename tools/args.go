package tools

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Arguments are a call's arguments as Entry.Check validated them, in the
// two forms a call needs, both made from one parse.
type Arguments struct {
	// Raw is the arguments' JSON text ({} when the call sent none), which
	// the tool decodes (DecodeArgs).
	Raw json.RawMessage
	// Value is the same arguments decoded as encoding/json decodes into
	// an `any` with UseNumber (numbers are json.Number), as the schema
	// checked them. It is shared: read it, never change it.
	Value map[string]any
}

// DecodeArgs unmarshals a call's arguments into v, refusing members v does
// not have. The registry has validated them already; this also protects
// tools called directly, as tests and examples do.
func DecodeArgs(tool string, raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(KindInvalidArgument, "invalid arguments for %s: %v", tool, err)
	}
	return nil
}

// IntArg reads an optional integer argument decoded as float64 (JSON
// Schema's "integer" admits 5.0, which encoding/json will not put in an
// int): def when absent, an invalid_argument error when not an integer in
// [lo, hi].
func IntArg(name string, v *float64, def, lo, hi int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v != float64(int64(*v)) || *v < float64(lo) || *v > float64(hi) {
		return 0, Errorf(KindInvalidArgument, "%s must be an integer from %d to %d", name, lo, hi)
	}
	return int(*v), nil
}

// UTF8Cut returns the largest n' <= n at which b can be cut without
// splitting a valid UTF-8 sequence. Invalid bytes may be cut anywhere:
// they become U+FFFD either way.
func UTF8Cut(b []byte, n int) int {
	if n >= len(b) {
		return len(b)
	}
	for s := n; s >= 0 && s > n-utf8.UTFMax; s-- {
		if !utf8.RuneStart(b[s]) {
			continue
		}
		if s == n {
			return n
		}
		r, size := utf8.DecodeRune(b[s:])
		if (r != utf8.RuneError || size > 1) && s+size > n {
			return s
		}
		return n
	}
	return n
}

// ValidText makes b a valid UTF-8 string, each run of bad bytes becoming
// one U+FFFD, so results always encode as JSON strings without surprises.
func ValidText(b []byte) string {
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
