package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"unicode"
	"unicode/utf8"

	"troupe/redact"
)

// Printable returns s as it may be shown to the person deciding whether a
// call runs: every character that could hide, reorder or fake text is
// replaced by a visible escape, so what the person reads is what runs.
// Every text of the approval form that comes from a tool, a downstream
// server or the model goes through it (tool name, description, side
// effects, sandbox profile, working directory, environment names; the
// command and the arguments through quoted, which uses the same rule).
//
// A character is shown as it is when unicode.IsPrint accepts it (letters,
// marks, numbers, punctuation, symbols and the ASCII space) and it is not a
// default-ignorable code point (Other_Default_Ignorable_Code_Point, such as
// the Hangul fillers, or a variation selector). Everything else is escaped:
// control characters (Cc; \n, \r and \t by those names), format characters
// (Cf: bidi embeddings, overrides, isolates and marks, zero-width spaces and
// joiners, the word joiner, the byte order mark, the soft hyphen, tag
// characters), private use (Co), unassigned code points (Cn), line and
// paragraph separators (Zl, Zp) and every space but U+0020 (Zs). Runes are
// escaped as \u202e or \U000e0041, bytes that are not UTF-8 (surrogates
// included) as \xff. Combining marks are kept, so decomposed accents read
// as they should.
//
// A backslash is kept as it is here; inside quoted strings (the command and
// the arguments) it is escaped as \\, so there an escape is always ours.
func Printable(s string) string {
	if allPrintable(s) {
		return s
	}
	return string(appendEscaped(make([]byte, 0, len(s)+16), s, false))
}

// quoted is s as a double-quoted string in JSON's style (\" and \\), with
// every character Printable escapes escaped the same way.
func quoted(s string) string {
	b := append(make([]byte, 0, len(s)+2), '"')
	return string(append(appendEscaped(b, s, true), '"'))
}

// printable is the rule Printable applies to one rune.
func printable(r rune) bool {
	return unicode.IsPrint(r) &&
		!unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) &&
		!unicode.Is(unicode.Variation_Selector, r)
}

func allPrintable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !printable(r) {
			return false
		}
	}
	return true
}

// appendEscaped appends s to b with every rune that is not printable (and,
// when quoting, '"' and '\\') escaped.
func appendEscaped(b []byte, s string, quoting bool) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b = fmt.Appendf(b, `\x%02x`, s[i])
		case quoting && (r == '"' || r == '\\'):
			b = append(b, '\\', byte(r))
		case printable(r):
			b = append(b, s[i:i+size]...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r <= 0xFFFF:
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = fmt.Appendf(b, `\U%08x`, r)
		}
		i += size
	}
	return b
}

// shownJSON renders a decoded JSON value (decoded with UseNumber) for a
// person: compact JSON with object members sorted, every string (member
// names too) passed through mask and then quoted, and the values of
// members named like secrets replaced by redact.Mask. It never changes v,
// which may be the value the tool is about to run with. Unlike encoding/json it
// leaves <, > and & alone, which commands are full of.
func shownJSON(v any, mask func(string) string) string {
	var b bytes.Buffer
	writeShown(&b, v, mask)
	return b.String()
}

func writeShown(b *bytes.Buffer, v any, mask func(string) string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quoted(mask(k)))
			b.WriteByte(':')
			if redact.IsSecretKey(k) {
				// A member named like a secret (token, password, ...)
				// is never shown, whatever its value.
				b.WriteString(quoted(redact.Mask))
				continue
			}
			writeShown(b, x[k], mask)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeShown(b, e, mask)
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quoted(mask(e)))
		}
		b.WriteByte(']')
	case string:
		b.WriteString(quoted(mask(x)))
	case json.Number:
		b.WriteString(Printable(mask(x.String()))) // a secret may be all digits
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	default: // not produced by a UseNumber decode; shown, never dropped
		enc, _ := json.Marshal(x)
		b.WriteString(Printable(string(enc)))
	}
}
