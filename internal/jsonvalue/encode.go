package jsonvalue

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// plain[c] is 1 for the ASCII bytes a JSON string holds as they are (not
// control characters, ", \, or <, > and &, which json.Marshal escapes).
const plain = "" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x01\x01\x00\x01\x01\x01\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x01\x00\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"

// AppendString appends s as encoding/json encodes a string: quoted, with
// <, > and & escaped (as json.Marshal does), U+2028 and U+2029 escaped,
// and each byte of invalid UTF-8 written as \ufffd. s is text or bytes.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if plain[c] == 1 {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		// string() of at most 4 bytes stays on the stack.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendStrings appends s as encoding/json encodes a []string (nil is
// null).
func AppendStrings(dst []byte, s []string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, v := range s {
		dst = AppendString(comma(dst, i), v)
	}
	return append(dst, ']')
}

// AppendStringMap appends m as encoding/json encodes a map[string]string:
// members sorted by key, nil as null.
func AppendStringMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	var short [16]string
	dst = append(dst, '{')
	for i, k := range sortedKeys(m, short[:0]) {
		dst = appendKey(dst, i, k)
		dst = AppendString(dst, m[k])
	}
	return append(dst, '}')
}

// sortedKeys appends m's keys to keys, sorted. (The callers' keys are
// arrays on their stacks, so that sorting a small map allocates nothing;
// the appenders take no function for the values for the same reason: a
// function value would make their buffer escape.)
func sortedKeys[V any](m map[string]V, keys []string) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendKey appends the i-th member's key and colon.
func appendKey(dst []byte, i int, k string) []byte {
	return append(AppendString(comma(dst, i), k), ':')
}

// comma appends the comma that comes before the i-th element or member.
func comma(dst []byte, i int) []byte {
	if i > 0 {
		return append(dst, ',')
	}
	return dst
}

// AppendCanonical appends what json.Marshal gives for the value that
// json.Unmarshal gives an `any` for v's JSON: object members sorted by
// key, strings as AppendString writes them, and every number as the
// float64 it decodes to, written as encoding/json writes a float64 (so
// 1.0 and 1e0 are 1). A number a float64 cannot hold is written null,
// since json.Unmarshal leaves such a value nil (and fails, which callers
// that encode it anyway ignore). v holds what Decode gives, or what
// json.Unmarshal gives an `any` (float64 numbers); a value of any other
// type is written by json.Marshal (null if that fails).
func AppendCanonical(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return AppendString(dst, x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return append(dst, "null"...)
		}
		return AppendFloat(dst, f)
	case float64:
		return AppendFloat(dst, x)
	case []any:
		if x == nil {
			return append(dst, "null"...)
		}
		dst = append(dst, '[')
		for i, e := range x {
			dst = AppendCanonical(comma(dst, i), e)
		}
		return append(dst, ']')
	case map[string]any:
		if x == nil {
			return append(dst, "null"...)
		}
		var short [16]string
		dst = append(dst, '{')
		for i, k := range sortedKeys(x, short[:0]) {
			dst = appendKey(dst, i, k)
			dst = AppendCanonical(dst, x[k])
		}
		return append(dst, '}')
	}
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}

// AppendFloat appends f as encoding/json encodes a float64: like
// strconv's shortest form, with an exponent (e-7, e+21) only below 1e-6
// and from 1e21 on. NaN and infinities, which JSON cannot hold, are
// written null (encoding/json refuses them).
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
